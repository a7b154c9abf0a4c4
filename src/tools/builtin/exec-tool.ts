import { TextDecoder } from "node:util";

import { z } from "zod";
import type { ExecResult } from "../../sandbox/index.js";
import { resolveToolPath } from "../session-state.js";
import { defineTool, type ToolResult } from "../tool-definition.js";
import { HeadTailBuffer } from "../truncate.js";
import { limits } from "./limits.js";

const inputSchema = z.strictObject({
  command: z.string().min(1).describe("Shell command, run with bash (pipes, &&, globs work)."),
  workdir: z
    .string()
    .min(1)
    .optional()
    .describe("Directory to run in; default the working directory."),
  env: z
    .record(z.string(), z.string())
    .optional()
    .describe("Extra environment variables for this command only."),
  timeoutSec: z
    .number()
    .positive()
    .max(limits.execMaxTimeoutSec)
    .optional()
    .describe(
      `Kill the command (and everything it started) after this many seconds. Default ${limits.execDefaultTimeoutSec}.`,
    ),
  background: z
    .boolean()
    .optional()
    .describe(
      "Start it in the background (servers, watchers, long builds) and return a process id for the process tool.",
    ),
});

/**
 * Per-stream cap handed to the sandbox. Together the two streams stay within the tool's output
 * budget, so whenever the combined view drops output the sandbox has saved the full log.
 */
const STREAM_CAP_BYTES = Math.floor(limits.outputChars / 2);

export const execTool = defineTool({
  name: "exec",
  description: [
    "Run a shell command in the sandbox (bash, in the login environment: exports in ~/.profile apply from the next call) and return its combined stdout/stderr and exit code.",
    `Long output keeps the first and last parts and names a log file with all of it (read or grep it). Default timeout ${limits.execDefaultTimeoutSec}s.`,
    "No network unless the sandbox allows it. For servers or watchers set background: true and use the process tool.",
    "Prefer read/ls/find/grep for looking at files and edit/write/apply_patch for changing them.",
  ].join("\n"),
  inputSchema,
  async execute(input, context): Promise<ToolResult> {
    const { sandbox, signal } = context;
    const cwd = input.workdir === undefined ? undefined : resolveToolPath(sandbox, input.workdir);
    if (input.background) {
      const info = await sandbox.processes.start(input.command, {
        signal,
        cwd,
        env: input.env,
      });
      return {
        content: [
          {
            type: "text",
            text: `Started background process ${info.id}: ${info.command}\nUse process {"action":"poll","id":"${info.id}"} for new output, "log" for all of it, "kill" to stop it.`,
          },
        ],
        isError: false,
      };
    }
    const combined = new HeadTailBuffer(limits.outputChars);
    // Made at a stream's first chunk: a TextDecoder costs more to make than a quiet command's
    // whole tool call.
    const decoders: { out?: TextDecoder; err?: TextDecoder } = {};
    let streamed = false;
    const take = (text: string): void => {
      combined.append(text);
      if (text !== "") context.onOutput?.(text);
    };
    const timeoutSec = input.timeoutSec ?? limits.execDefaultTimeoutSec;
    const result = await sandbox.exec(input.command, {
      signal,
      cwd,
      env: input.env,
      timeoutMs: Math.round(timeoutSec * 1000),
      maxOutputBytes: STREAM_CAP_BYTES,
      onStdout: (chunk) => {
        streamed = true;
        take((decoders.out ??= new TextDecoder()).decode(chunk, { stream: true }));
      },
      onStderr: (chunk) => {
        streamed = true;
        take((decoders.err ??= new TextDecoder()).decode(chunk, { stream: true }));
      },
    });
    take((decoders.out?.decode() ?? "") + (decoders.err?.decode() ?? ""));
    return renderExecResult({ result, streamed, combined, timeoutSec });
  },
});

function renderExecResult(options: {
  result: ExecResult;
  streamed: boolean;
  combined: HeadTailBuffer;
  timeoutSec: number;
}): ToolResult {
  const { result } = options;
  let output: string;
  let dropped = result.truncated;
  if (options.streamed) {
    const kept = options.combined.result();
    output = kept.text;
    dropped ||= kept.omitted > 0;
  } else {
    // A backend that does not stream: its own head/tail-kept strings, stdout then stderr.
    output = [result.stdout, result.stderr].filter((part) => part !== "").join("\n");
  }
  const lines: string[] = [];
  lines.push(output === "" ? "(no output)" : output.replace(/\n$/, ""));
  const lostStderr = dropped ? stderrLostInTheMiddle(output, result.stderr) : undefined;
  if (lostStderr !== undefined) {
    lines.push(`[The end of stderr arrived before the end of stdout and was left out above:]`);
    lines.push(lostStderr);
  }
  const status: string[] = [];
  if (result.timedOut) {
    status.push(
      `timed out after ${options.timeoutSec}s and was killed (with everything it started)`,
    );
  } else if (result.oomKilled) {
    status.push("killed by the out-of-memory killer (the sandbox memory limit)");
  } else if (result.exitCode === null) {
    status.push(`killed by signal ${result.signal ?? "(unknown)"}`);
  } else {
    status.push(`exit code ${result.exitCode}`);
  }
  status.push(`${(result.durationMs / 1000).toFixed(1)}s`);
  lines.push(`[${status.join(", ")}]`);
  if (dropped) {
    lines.push(
      result.fullOutputPath
        ? `[Output was long; the middle was left out. Full output: ${result.fullOutputPath} (read it with offset/limit, or grep it).]`
        : "[Output was long; the middle was left out. Rerun with the output redirected to a file to see all of it.]",
    );
  }
  if (result.timedOut) {
    lines.push(
      `[Raise timeoutSec (max ${limits.execMaxTimeoutSec}) or run it with background: true.]`,
    );
  }
  const failed = result.exitCode !== 0 || result.timedOut || result.oomKilled;
  return { content: [{ type: "text", text: lines.join("\n") }], isError: failed };
}

/** Characters of stderr's end restored when the combined view dropped it. */
const STDERR_TAIL_CHARS = 2000;

/**
 * stdout and stderr are two pipes, so a command's last error line can arrive while stdout is
 * still flooding in and end up in the dropped middle of the combined view. That line is usually
 * the one that matters: the end of stderr (from the sandbox's own per-stream capture), when the
 * combined view does not contain it.
 */
function stderrLostInTheMiddle(output: string, stderr: string): string | undefined {
  const end = stderr.trimEnd();
  if (end === "") return undefined;
  let tail = end.length > STDERR_TAIL_CHARS ? end.slice(end.length - STDERR_TAIL_CHARS) : end;
  if (tail.length < end.length) {
    const lineStart = tail.indexOf("\n");
    if (lineStart !== -1 && lineStart < tail.length - 1) tail = tail.slice(lineStart + 1);
  }
  return output.includes(tail) ? undefined : tail;
}
