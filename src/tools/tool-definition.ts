import type { z } from "zod";
import type { Logger } from "../common/index.js";
import type { Sandbox } from "../sandbox/index.js";
import type { ToolSessionState } from "./session-state.js";
import type { SessionToolHost } from "./sessions/session-tool-host.js";

/** What a tool gets to do its work: the sandbox (and nothing that can stop or destroy it). */
export interface ToolContext {
  sandbox: Sandbox;
  /** Aborts the call; tools pass it to every sandbox operation. */
  signal: AbortSignal;
  /** Already bound to the run; tools add `{ tool }`. */
  logger: Logger;
  /** The model's id for this call, for logs. */
  toolCallId: string;
  /**
   * Takes a running tool's output as it comes (exec: stdout and stderr as decoded), for people
   * to watch; the model gets the result only. Must not throw. Absent when nobody watches.
   */
  onOutput?: ((text: string) => void) | undefined;
  /**
   * What this toolset remembers between calls (last reads, for stale-write protection).
   * `createToolset` supplies its own; without it a per-sandbox default is used.
   */
  session?: ToolSessionState | undefined;
  /**
   * The run's way to other sessions (spawn a subagent, message, list, read), for the session
   * tools; the runner binds it to the requesting run. Absent outside an agent run.
   */
  sessions?: SessionToolHost | undefined;
}

export type ToolResultContent =
  { type: "text"; text: string } | { type: "image"; mediaType: string; dataBase64: string };

/** What the model sees as the tool result. */
export interface ToolResult {
  content: ToolResultContent[];
  /** Sent as `is_error`: the call failed and the text says why and what to do. */
  isError: boolean;
}

export interface ToolDefinition<Input = unknown> {
  /** The name the model calls, e.g. "read". */
  name: string;
  /** Written for the model: what it does, when to use it, what it returns. */
  description: string;
  /** Validates (and defaults) the model's input before anything runs. */
  inputSchema: z.ZodType<Input>;
  /**
   * Runs the tool. May throw: the toolset turns any error into an `isError` result. Returns an
   * `isError` result itself for failures it can explain better than a thrown error would.
   */
  execute(input: Input, context: ToolContext): Promise<ToolResult>;
}

/** A tool as offered to the model. */
export interface ModelToolSpec {
  name: string;
  description: string;
  /** JSON Schema of the input (from the zod schema, `z.toJSONSchema`). */
  inputSchema: Record<string, unknown>;
}

/** A successful text result. */
export function textResult(text: string): ToolResult {
  return { content: [{ type: "text", text }], isError: false };
}

/** A failed call; `text` says what went wrong and what to do next. */
export function errorResult(text: string): ToolResult {
  return { content: [{ type: "text", text }], isError: true };
}

/**
 * Erases a definition's input type so tools of different inputs fit one list; sound because the
 * toolset always validates with `inputSchema` before calling `execute`.
 */
export function defineTool<Input>(definition: ToolDefinition<Input>): ToolDefinition {
  return definition;
}
