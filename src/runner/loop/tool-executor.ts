import { CordonError, messageOf } from "../../common/index.js";
import type { ToolResult, ToolResultContent } from "../../tools/index.js";
import type { ToolResultBlock, ToolUseBlock } from "../model/index.js";

/** A tool as the loop offers it to the model. */
export interface RunnerToolSpec {
  name: string;
  description: string;
  /** JSON Schema of the input. */
  inputSchema: Record<string, unknown>;
}

/** Per-call context handed to a tool. */
export interface ToolCallContext {
  /**
   * Fires on abort, run timeout or this call's own timeout; a tool stops its work (and any
   * command it started) and settles soon after.
   */
  signal: AbortSignal;
  toolCallId: string;
  /**
   * Takes the call's output as it comes, for people to watch (never the model's result). Must
   * not throw. Absent when nobody watches.
   */
  onOutput?: ((text: string) => void) | undefined;
}

/**
 * The tools a run may use. Structural on purpose: the tools module's `Toolset` is adapted with a
 * closure that adds the sandbox, so the runner does not depend on it. `call` is expected to turn
 * bad input, denied or failing tools into `isError` results; if it throws anyway, the loop does so.
 */
export interface RunnerToolset {
  specs: readonly RunnerToolSpec[];
  /**
   * Whether a tool may run: undefined when it may, else the message for the model (the model can
   * name any tool). This is the run's one decision (the tools module's `Toolset.refusal`, made
   * from the policy plan). Without it, exactly the tools in `specs` may run.
   */
  refusal?: ((name: string) => string | undefined) | undefined;
  call(name: string, rawInput: unknown, context: ToolCallContext): Promise<ToolResult>;
}

/**
 * The abort reason of a call stopped by its own limit (`tools.callTimeoutSec`), so whatever the
 * call started (a subagent run) can tell it from an interrupt.
 */
export class ToolCallDeadline extends Error {
  constructor(timeoutMs: number) {
    super(`the tool call reached its limit of ${timeoutMs} ms (tools.callTimeoutSec)`);
  }
}

/** How long a timed-out tool may take to stop (and kill its command) before it is left behind. */
const stopGraceMs = 15_000;

export interface ToolCallOutcome {
  result: ToolResultBlock;
  /** The call ran past its timeout and was stopped. */
  timedOut: boolean;
}

function text(value: string): ToolResultContent[] {
  return [{ type: "text", text: value }];
}

/** The refusal for a tool call, asked of the toolset (see `RunnerToolset.refusal`). */
export function refusalOf(toolset: RunnerToolset, name: string): string | undefined {
  if (toolset.refusal) return toolset.refusal(name);
  if (toolset.specs.some((spec) => spec.name === name)) return undefined;
  const names = toolset.specs.map((spec) => spec.name).join(", ") || "none";
  return `There is no tool named "${name}" in this run. Available tools: ${names}.`;
}

/**
 * Runs one tool call and always returns a tool_result: a refused or truncated call, a thrown
 * error or a timeout become `isError` results the model can read, never exceptions that end the
 * run. A call past `timeoutMs` (0 = none) has its signal fired, so the tool stops its command,
 * and is answered once it has stopped (or after a grace period if it ignores the signal).
 */
export async function executeToolCall(
  toolset: RunnerToolset,
  use: ToolUseBlock,
  options: {
    signal: AbortSignal;
    timeoutMs?: number | undefined;
    onOutput?: ((text: string) => void) | undefined;
  },
): Promise<ToolCallOutcome> {
  const answer = (content: ToolResultContent[], isError: boolean, timedOut = false) => ({
    result: {
      type: "tool_result" as const,
      toolUseId: use.id,
      content:
        content.length > 0 ? content : text(isError ? "(error without output)" : "(no output)"),
      isError,
    },
    timedOut,
  });
  if (use.truncated) {
    return answer(
      text(
        `The call to ${use.name} was not run: your output was cut off before its input was complete. ` +
          "Issue it again with a smaller input (for large files, write them in several parts).",
      ),
      true,
    );
  }
  const refusal = refusalOf(toolset, use.name);
  if (refusal !== undefined) return answer(text(refusal), true);

  const { signal } = options;
  const timeoutMs = options.timeoutMs ?? 0;
  const deadline = new AbortController();
  const timer =
    timeoutMs > 0
      ? setTimeout(() => deadline.abort(new ToolCallDeadline(timeoutMs)), timeoutMs)
      : undefined;
  const callSignal = AbortSignal.any([signal, deadline.signal]);
  try {
    const work = toolset.call(use.name, use.input, {
      signal: callSignal,
      toolCallId: use.id,
      onOutput: options.onOutput,
    });
    const outcome = await settleOrStop(work, signal, deadline.signal);
    if (deadline.signal.aborted && !signal.aborted) {
      return answer(text(timeoutMessage(use.name, timeoutMs)), true, true);
    }
    return answer(outcome.content, outcome.isError);
  } catch (error) {
    if (signal.aborted) {
      return answer(text(`The call to ${use.name} was aborted before it finished.`), true);
    }
    if (deadline.signal.aborted)
      return answer(text(timeoutMessage(use.name, timeoutMs)), true, true);
    const fix = CordonError.is(error) && error.fix ? ` ${error.fix}` : "";
    return answer(text(`${use.name} failed: ${messageOf(error)}${fix}`), true);
  } finally {
    if (timer) clearTimeout(timer);
  }
}

function timeoutMessage(name: string, timeoutMs: number): string {
  return (
    `The call to ${name} was stopped after ${formatSeconds(timeoutMs)}, the limit of one tool call ` +
    "(tools.callTimeoutSec); anything it started was killed. Split the work into smaller steps, " +
    "or run a long command in the background (exec with background: true) and poll it."
  );
}

function formatSeconds(ms: number): string {
  return ms >= 1000 ? `${Math.round(ms / 1000)} s` : `${ms} ms`;
}

/**
 * Settles when `work` does. When the run is aborted it rejects at once (the abort path answers
 * the call); when only the call's deadline passed it waits for the tool to stop its command, up
 * to a grace period, so a timed-out command is gone before the next call starts.
 */
function settleOrStop<T>(work: Promise<T>, run: AbortSignal, deadline: AbortSignal): Promise<T> {
  if (run.aborted) return Promise.reject(new Error("aborted"));
  return new Promise<T>((resolve, reject) => {
    let graceTimer: NodeJS.Timeout | undefined;
    const onAbort = (): void => reject(new Error("aborted"));
    const onDeadline = (): void => {
      graceTimer = setTimeout(() => reject(new Error("timeout")), stopGraceMs);
    };
    run.addEventListener("abort", onAbort, { once: true });
    deadline.addEventListener("abort", onDeadline, { once: true });
    const done = (): void => {
      run.removeEventListener("abort", onAbort);
      deadline.removeEventListener("abort", onDeadline);
      if (graceTimer) clearTimeout(graceTimer);
    };
    work.then(
      (value) => {
        done();
        resolve(value);
      },
      (error: unknown) => {
        done();
        reject(error instanceof Error ? error : new Error(String(error)));
      },
    );
  });
}
