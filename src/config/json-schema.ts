import { z } from "zod";

import { cordonConfigSchema } from "./schema.js";

/** JSON Schema (draft 2020-12) of the config file as a user writes it, defaults included. */
export function configJsonSchema(): Record<string, unknown> {
  const schema = z.toJSONSchema(cordonConfigSchema, { io: "input", unrepresentable: "any" });
  return { ...schema, title: "cordon configuration (cordon.json5)" };
}
