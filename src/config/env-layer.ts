import { environmentVariables, invalidVariable } from "./environment.js";
import type { PlainObject } from "./merge.js";

/** Environment variables that set config keys; they beat the file (docs/configuration.md). */
export const configEnvironment = environmentVariables.flatMap((variable) =>
  variable.configKey === undefined ? [] : [{ ...variable, key: variable.configKey }],
);

function setPath(target: PlainObject, dotted: string, value: string): void {
  const parts = dotted.split(".");
  let node = target;
  parts.slice(0, -1).forEach((part) => {
    const next = (node[part] ?? {}) as PlainObject;
    node[part] = next;
    node = next;
  });
  node[parts[parts.length - 1] ?? ""] = value;
}

/** The environment layer as a partial config; a bad value names the variable and its choices. */
export function environmentLayer(env: Readonly<Record<string, string | undefined>>): PlainObject {
  const layer: PlainObject = {};
  for (const variable of configEnvironment) {
    const value = env[variable.name];
    if (value === undefined || value === "") continue;
    if (!variable.valid(value)) throw invalidVariable(variable, value);
    setPath(layer, variable.key, value);
  }
  return layer;
}
