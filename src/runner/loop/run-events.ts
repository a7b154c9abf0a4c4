import { ExitCode } from "../../common/index.js";
import type { ToolOutputEvent } from "./tool-output.js";
import type {
  AssistantMessage,
  ModelUsage,
  RunCost,
  StopReason,
  ToolResultContent,
} from "../model/index.js";

/**
 * How a run ended:
 * - `completed`: the model finished its answer;
 * - `limit_turns`: `maxTurns` model calls were used up;
 * - `limit_tokens`: the token budget was spent, or the answer was cut off at `maxOutputTokens`;
 * - `timeout`: `timeoutMs` passed;
 * - `aborted`: the caller's signal fired (Ctrl-C);
 * - `refusal`: the model declined to continue;
 * - `model_error`: the model API failed after retries and fallbacks;
 * - `context_overflow`: the conversation did not fit even after compaction and a reset;
 * - `policy_blocked`: the run was refused by policy before it started;
 * - `config_error`: the configuration or the request was invalid (nothing ran);
 * - `sandbox_error`: the sandbox could not be provided (Docker down, image missing, start failed);
 * - `setup_failed`: the run's `--setup-cmd` failed (before any agent turn), as in `fix-tests`;
 * - `internal_error`: a bug.
 */
export type RunStatus =
  | "completed"
  | "limit_turns"
  | "limit_tokens"
  | "timeout"
  | "aborted"
  | "refusal"
  | "model_error"
  | "context_overflow"
  | "policy_blocked"
  | "config_error"
  | "sandbox_error"
  | "setup_failed"
  | "internal_error";

/** The process exit code for a run status (DESIGN.md §7). */
export function exitCodeForStatus(status: RunStatus): ExitCode {
  switch (status) {
    case "completed":
      return ExitCode.success;
    case "limit_turns":
    case "limit_tokens":
      return ExitCode.limit;
    case "timeout":
      return ExitCode.timeout;
    case "aborted":
      return ExitCode.interrupted;
    case "refusal":
    case "model_error":
    case "context_overflow":
      return ExitCode.model;
    case "policy_blocked":
      return ExitCode.policy;
    case "config_error":
      return ExitCode.usage;
    case "sandbox_error":
      return ExitCode.sandbox;
    case "setup_failed":
      return ExitCode.environment;
    case "internal_error":
      return ExitCode.internal;
  }
}

/**
 * Token totals of a run: input and output summed over every call; cache read/write are those of
 * the last call (they describe the cache state, and summing them would count the prefix again).
 */
export type RunUsage = ModelUsage;

/** The final record of a run, also the value `runAgentLoop` resolves to. */
export interface RunResult {
  runId: string;
  sessionKey: string;
  status: RunStatus;
  exitCode: ExitCode;
  /** Model calls made (successful ones). */
  turns: number;
  usage: RunUsage;
  /** Wall-clock time of the whole run, in milliseconds (sandbox start and session wait included). */
  durationMs: number;
  /**
   * The model id the API reported for the last successful call (e.g. `claude-sonnet-4-5-20250929`
   * for a requested `claude-sonnet-4-5`, or a fallback); absent when no call succeeded.
   */
  model?: string;
  /** Estimated cost at list prices (see runner/model/pricing.ts). */
  cost: RunCost;
  /** Text of the last assistant message. */
  finalText: string;
  /** For every status but `completed`: what happened, as a sentence. */
  message?: string;
  /** What the user can do next. */
  fix?: string;
}

/**
 * What a run reports as it goes. `run-start` and `run-end` frame every run exactly once and come
 * from the orchestrator (run-task.ts, built by run-frame.ts, which an MCP session's framing uses
 * too), the one layer that sees runs fail before the loop; the loop emits the rest.
 */
export type RunEvent =
  | {
      type: "run-start";
      runId: string;
      sessionKey: string;
      model: string;
      /** Who drives the run when it is not cordon's loop (an MCP client's name and version). */
      client?: string | undefined;
    }
  | { type: "model-start"; turn: number; model: string }
  | { type: "text-delta"; text: string }
  | { type: "thinking-delta"; thinking: string }
  | {
      type: "assistant-message";
      turn: number;
      model: string;
      message: AssistantMessage;
      stopReason: StopReason;
    }
  | { type: "tool-call"; toolCallId: string; name: string; input: Record<string, unknown> }
  /** A running tool's output as it comes, coalesced and bounded (tool-output.ts). */
  | ToolOutputEvent
  | {
      type: "tool-result";
      toolCallId: string;
      name: string;
      isError: boolean;
      content: ToolResultContent[];
      /** True when the call was never run (truncated, skipped by steering, aborted). */
      skipped: boolean;
    }
  | { type: "usage"; turn: ModelUsage; total: RunUsage }
  | {
      /**
       * A failed model call is tried again after `delayMs`: the model client's transport retries
       * (with `attempt` and `maxRetries`) or the loop's one retry after those ran out (without).
       */
      type: "retry";
      reason: string;
      delayMs: number;
      error: string;
      /** The HTTP status, when the API answered. */
      status?: number | undefined;
      /** Which transport retry of this call, 1 for the first. */
      attempt?: number | undefined;
      maxRetries?: number | undefined;
    }
  | { type: "fallback"; from: string; to: string; error: string }
  /** The API rejected the thinking settings; the next call asks for `to` ("off": none). */
  | { type: "thinking-downgrade"; error: string; to: string }
  /** A tool call ran past `tools.callTimeoutSec` and was stopped; its result says so. */
  | { type: "tool-timeout"; toolCallId: string; name: string; timeoutMs: number }
  /** The older messages were summarised in `chunks` parts (attempt n of up to 3 this run). */
  | {
      type: "compaction";
      summarizedMessages: number;
      keptMessages: number;
      chunks: number;
      attempt: number;
    }
  /** The history was dropped; `message` tells the user what happened and how to avoid it. */
  | { type: "session-reset"; reason: string; message: string }
  | { type: "steering"; messages: number; skippedToolCalls: number }
  | { type: "follow-up"; messages: number }
  | ({ type: "run-end" } & RunResult);
