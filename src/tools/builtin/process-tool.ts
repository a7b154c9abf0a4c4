import { z } from "zod";
import type { ProcessInfo } from "../../sandbox/index.js";
import { defineTool, errorResult, textResult, type ToolResult } from "../tool-definition.js";
import { truncateMiddle } from "../truncate.js";
import { limits } from "./limits.js";

// One flat object (not a union): the model API wants a plain object schema at the top.
const inputSchema = z
  .strictObject({
    action: z
      .enum(["list", "poll", "log", "write", "kill"])
      .describe("What to do; every action except list needs id."),
    id: z.string().min(1).optional().describe("Process id from exec with background: true."),
    data: z
      .string()
      .optional()
      .describe('For action "write": text sent to the stdin of the process (end lines with \\n).'),
  })
  .superRefine((input, issues) => {
    if (input.action !== "list" && input.id === undefined) {
      issues.addIssue({
        code: "custom",
        path: ["id"],
        message: `action "${input.action}" needs id`,
      });
    }
    if (input.action === "write" && input.data === undefined) {
      issues.addIssue({ code: "custom", path: ["data"], message: 'action "write" needs data' });
    }
  });

export const processTool = defineTool({
  name: "process",
  description: [
    "Manage background processes started by exec with background: true.",
    'action "list": all processes and their state; "poll": output since the last poll and whether it is still running;',
    '"log": all output so far; "write": send data to its stdin; "kill": stop it and everything it started.',
  ].join("\n"),
  inputSchema,
  async execute(input, context): Promise<ToolResult> {
    const table = context.sandbox.processes;
    const signal = context.signal;
    const id = input.id ?? "";
    if (input.action === "list") {
      const all = await table.list({ signal });
      if (all.length === 0) return textResult("No background processes.");
      return textResult(all.map(describeInfo).join("\n"));
    }
    try {
      switch (input.action) {
        case "poll":
        case "log": {
          const { info, output } =
            input.action === "poll"
              ? await table.poll(id, { signal })
              : await table.log(id, { signal });
          const shown = truncateMiddle(output, limits.outputChars);
          const body = output === "" ? "(no new output)" : shown.text.replace(/\n$/, "");
          return textResult(`${body}\n[${describeInfo(info)}]`);
        }
        case "write":
          await table.write(id, input.data ?? "", { signal });
          return textResult(
            `Wrote ${Buffer.byteLength(input.data ?? "")} bytes to the stdin of ${id}.`,
          );
        case "kill": {
          const info = await table.kill(id, { signal });
          return textResult(`Killed ${id}. [${describeInfo(info)}]`);
        }
      }
    } catch (error) {
      // An unknown id is the common mistake; say which ids exist.
      const known = await table.list({ signal }).catch(() => undefined);
      if (known && !known.some((info) => info.id === id)) {
        const ids = known.map((info) => info.id).join(", ") || "none";
        return errorResult(`No background process with id "${id}". Known ids: ${ids}.`);
      }
      throw error;
    }
  },
});

function describeInfo(info: ProcessInfo): string {
  const state =
    info.state === "running"
      ? "running"
      : `exited${info.exitCode === null ? " (killed)" : ` with code ${info.exitCode}`}`;
  return `${info.id}: ${state}, started ${info.startedAt}: ${info.command}`;
}
