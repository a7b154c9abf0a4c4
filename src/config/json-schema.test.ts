import { describe, expect, it } from "vitest";

import { configJsonSchema } from "./json-schema.js";

interface SchemaNode {
  description?: string;
  properties?: Record<string, SchemaNode>;
  items?: SchemaNode;
  additionalProperties?: SchemaNode | boolean;
  anyOf?: SchemaNode[];
  oneOf?: SchemaNode[];
  allOf?: SchemaNode[];
  $defs?: Record<string, SchemaNode>;
}

/** Every object property of the schema, with its dotted path (`agents.list[].sandbox.mode`). */
function properties(node: SchemaNode, at: string): { path: string; node: SchemaNode }[] {
  const found: { path: string; node: SchemaNode }[] = [];
  for (const [key, child] of Object.entries(node.properties ?? {})) {
    const path = at ? `${at}.${key}` : key;
    found.push({ path, node: child }, ...properties(child, path));
  }
  if (node.items) found.push(...properties(node.items, `${at}[]`));
  if (typeof node.additionalProperties === "object") {
    found.push(...properties(node.additionalProperties, `${at}.*`));
  }
  for (const branch of [...(node.anyOf ?? []), ...(node.oneOf ?? []), ...(node.allOf ?? [])]) {
    found.push(...properties(branch, at));
  }
  return found;
}

describe("the config's JSON Schema (what editors show)", () => {
  it("describes every key, so hovering any key in an editor says what it does", () => {
    const schema = configJsonSchema() as SchemaNode;
    const all = [
      ...properties(schema, ""),
      ...Object.entries(schema.$defs ?? {}).flatMap(([name, def]) =>
        properties(def, `$defs.${name}`),
      ),
    ];
    // The walk reaches deep keys of both flavours (defaults and per-agent overrides).
    expect(all.map((entry) => entry.path)).toEqual(
      expect.arrayContaining([
        "agents.defaults.sandbox.docker.ulimits",
        "agents.list[].sandbox.docker.binds",
        "agents.list[].tools.sandbox.tools.deny",
      ]),
    );
    const undescribed = all
      .filter((entry) => !entry.node.description?.trim())
      .map((entry) => entry.path);
    expect(undescribed).toEqual([]);
  });
});
