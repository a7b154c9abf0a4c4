import { ConfigError } from "../common/index.js";
import type { PlainObject } from "./merge.js";
import { sandboxModes, sandboxScopes, toolProfiles, workspaceAccessModes } from "./schema.js";

/** Environment variables that set config keys; they beat the file (docs/configuration.md). */
export const configEnvironment = [
  { name: "CORDON_MODEL", key: "agents.defaults.model.primary" },
  { name: "CORDON_SANDBOX_MODE", key: "agents.defaults.sandbox.mode", values: sandboxModes },
  { name: "CORDON_SANDBOX_SCOPE", key: "agents.defaults.sandbox.scope", values: sandboxScopes },
  {
    name: "CORDON_WORKSPACE_ACCESS",
    key: "agents.defaults.sandbox.workspaceAccess",
    values: workspaceAccessModes,
  },
  { name: "CORDON_SANDBOX_IMAGE", key: "agents.defaults.sandbox.docker.image" },
  { name: "CORDON_TOOLS_PROFILE", key: "agents.defaults.tools.profile", values: toolProfiles },
] as const;

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
    if ("values" in variable && !(variable.values as readonly string[]).includes(value)) {
      throw new ConfigError(
        `${variable.name}=${JSON.stringify(value)} is not valid: expected one of ${variable.values.join(", ")}`,
        { fix: `set ${variable.name} to one of ${variable.values.join(", ")}, or unset it` },
      );
    }
    setPath(layer, variable.key, value);
  }
  return layer;
}
