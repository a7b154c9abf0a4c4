import { CordonError, messageOf } from "../../common/index.js";
import type { ToolResultBlock, ToolResultContent, ToolUseBlock } from "../model/index.js";

/** What a tool returns: text and images, and whether it failed. */
export interface ToolResult {
  content: ToolResultContent[];
  isError: boolean;
}

/** A tool as the loop offers it to the model. */
export interface RunnerToolSpec {
  name: string;
  description: string;
  /** JSON Schema of the input. */
  inputSchema: Record<string, unknown>;
}

/** Per-call context handed to a tool. */
export interface ToolCallContext {
  /** Fires on abort or run timeout; a tool stops its work (and any command it started). */
  signal: AbortSignal;
  toolCallId: string;
}

/**
 * The tools a run may use. Structural on purpose: the tools module's `Toolset` is adapted with a
 * closure that adds the sandbox, so the runner does not depend on it. `call` is expected to turn
 * bad input, denied or failing tools into `isError` results; if it throws anyway, the loop does so.
 */
export interface RunnerToolset {
  specs: readonly RunnerToolSpec[];
  /**
   * The message for a call to a tool that is not in `specs` (the model can name any tool): the
   * policy layer knows which config key blocks it. Default: the list of available tools.
   */
  unavailable?: ((name: string) => string) | undefined;
  call(name: string, rawInput: unknown, context: ToolCallContext): Promise<ToolResult>;
}

function text(value: string): ToolResultContent[] {
  return [{ type: "text", text: value }];
}

/**
 * Runs one tool call and always returns a tool_result: an unknown tool, a thrown error or a
 * truncated call become `isError` results the model can read, never exceptions that end the run.
 */
export async function executeToolCall(
  toolset: RunnerToolset,
  use: ToolUseBlock,
  signal: AbortSignal,
): Promise<ToolResultBlock> {
  const result = (content: ToolResultContent[], isError: boolean): ToolResultBlock => ({
    type: "tool_result",
    toolUseId: use.id,
    content:
      content.length > 0 ? content : text(isError ? "(error without output)" : "(no output)"),
    isError,
  });
  if (use.truncated) {
    return result(
      text(
        `The call to ${use.name} was not run: your output was cut off before its input was complete. ` +
          "Issue it again with a smaller input (for large files, write them in several parts).",
      ),
      true,
    );
  }
  if (!toolset.specs.some((spec) => spec.name === use.name)) {
    const names = toolset.specs.map((spec) => spec.name).join(", ") || "none";
    const message =
      toolset.unavailable?.(use.name) ??
      `There is no tool named "${use.name}" in this run. Available tools: ${names}.`;
    return result(text(message), true);
  }
  try {
    const outcome = await raceAbort(
      toolset.call(use.name, use.input, { signal, toolCallId: use.id }),
      signal,
    );
    return result(outcome.content, outcome.isError);
  } catch (error) {
    if (signal.aborted) {
      return result(text(`The call to ${use.name} was aborted before it finished.`), true);
    }
    const fix = CordonError.is(error) && error.fix ? ` ${error.fix}` : "";
    return result(text(`${use.name} failed: ${messageOf(error)}${fix}`), true);
  }
}

/** Settles when `work` does, or rejects as soon as the signal fires (a tool that ignores it). */
function raceAbort<T>(work: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(new Error("aborted"));
  return new Promise<T>((resolve, reject) => {
    const onAbort = (): void => reject(new Error("aborted"));
    signal.addEventListener("abort", onAbort, { once: true });
    work.then(
      (value) => {
        signal.removeEventListener("abort", onAbort);
        resolve(value);
      },
      (error: unknown) => {
        signal.removeEventListener("abort", onAbort);
        reject(error instanceof Error ? error : new Error(String(error)));
      },
    );
  });
}
