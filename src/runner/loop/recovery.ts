import { fixForKind, type ModelApiError } from "../model/index.js";
import type { RunStatus } from "./run-events.js";
import { lowerThinking, type ThinkingSetting } from "./thinking.js";

/**
 * What the loop has already spent on recovering, and what it can still try. The loop owns it
 * and updates it after applying each decision; `nextRecovery` only reads it.
 */
export interface RecoveryState {
  /** The one retry of a transient error is used up. */
  retried: boolean;
  /** The thinking setting of the next request (undefined: off). */
  thinking: ThinkingSetting | undefined;
  /** Compactions attempted in this run, failed ones included. */
  compactions: number;
  /** The one session reset is used up. */
  reset: boolean;
  /** Fallback models not tried yet. */
  fallbacksLeft: number;
}

export interface RecoveryLimits {
  /** Compaction attempts before the session reset. */
  maxCompactions: number;
  /** Wait before the retry when the API named none, in ms. */
  retryDelayMs: number;
  /** Longest wait accepted from a retry-after header, in ms. */
  maxRetryDelayMs: number;
}

export const defaultRecoveryLimits: RecoveryLimits = {
  maxCompactions: 3,
  retryDelayMs: 2000,
  maxRetryDelayMs: 60_000,
};

/** What to do about a failed model call. Every branch but `fail` ends in another call. */
export type Recovery =
  | { action: "retry"; delayMs: number }
  | { action: "fallback" }
  | { action: "compact" }
  | { action: "reset" }
  | { action: "downgrade-thinking"; to: ThinkingSetting | undefined }
  | { action: "fail"; status: RunStatus; message: string; fix: string | undefined };

/**
 * The one place that decides how the loop recovers from a failed model call (DESIGN.md §6), in
 * this order: a context overflow is compacted (up to `maxCompactions` times), then the session
 * is reset once; a transient error is retried once; a request rejected for its thinking settings
 * steps thinking down one level; a role-ordering error is a bug in the transcript that another
 * model would not fix, so it fails with its own message; anything else falls back to the next
 * model, except billing and auth errors, which a person must fix. Pure: no session, no I/O.
 */
export function nextRecovery(
  error: ModelApiError,
  state: Readonly<RecoveryState>,
  limits: RecoveryLimits = defaultRecoveryLimits,
): Recovery {
  if (error.kind === "context_overflow") {
    if (state.compactions < limits.maxCompactions) return { action: "compact" };
    if (!state.reset) return { action: "reset" };
    return {
      action: "fail",
      status: "context_overflow",
      message:
        "The conversation does not fit the model's context window, even after compacting it and resetting the session.",
      fix: fixForKind("context_overflow"),
    };
  }
  if (error.transient && !state.retried) {
    const delayMs = Math.min(error.retryAfterMs ?? limits.retryDelayMs, limits.maxRetryDelayMs);
    return { action: "retry", delayMs };
  }
  if (error.kind === "invalid_request" && isThinkingError(error.message)) {
    const lower = lowerThinking(state.thinking);
    if (state.thinking !== undefined && state.thinking !== "off") {
      return { action: "downgrade-thinking", to: lower === "off" ? undefined : lower };
    }
  }
  if (error.kind === "invalid_request" && isRoleOrderingError(error.message)) {
    return {
      action: "fail",
      status: "model_error",
      message: `The session's messages are out of order for the model API: ${sentence(error.message)}`,
      fix: "This is a bug in cordon's transcript handling, not a problem with the model; continue in a new session (--session NAME) and report it with the session file.",
    };
  }
  if (error.kind !== "billing" && error.kind !== "auth" && state.fallbacksLeft > 0) {
    return { action: "fallback" };
  }
  return {
    action: "fail",
    status: "model_error",
    message: sentence(error.message),
    fix: error.fix,
  };
}

/** An invalid_request about the thinking settings (budget, model support, max_tokens vs budget). */
export function isThinkingError(message: string): boolean {
  return /thinking/i.test(message);
}

/**
 * The API's complaints about message order: roles that do not alternate, a tool_result without
 * the tool_use before it, a tool_use left without its result.
 */
export function isRoleOrderingError(message: string): boolean {
  return (
    /roles? must alternate/i.test(message) ||
    /tool_result.*(must|should) (follow|correspond|have)/i.test(message) ||
    /tool_use.*without.*tool_result/i.test(message) ||
    /unexpected `?tool_use_id`?/i.test(message) ||
    /first message must use the "user" role/i.test(message)
  );
}

export function sentence(text: string): string {
  const trimmed = text.trim();
  return /[.!?]$/.test(trimmed) ? trimmed : `${trimmed}.`;
}
