import JSON5 from "json5";

/** A config object as JSON5 text (unquoted keys where possible), as `cordon config show` prints it. */
export function formatConfigJson5(value: unknown): string {
  return `${JSON5.stringify(value, { space: 2, quote: '"' })}\n`;
}
