import { ModelError, type CordonErrorOptions } from "../../common/index.js";

/**
 * What went wrong with a model call, as far as the agent loop cares:
 * - `overloaded`: the API is busy (529 / overloaded_error); transient.
 * - `rate_limited`: too many requests or tokens (429); transient, often with `retryAfterMs`.
 * - `server`: another 5xx or a mid-stream `api_error`; transient.
 * - `network`: no connection, reset or timeout; transient.
 * - `billing`: credit balance or spend limit; never retried, a person must act.
 * - `auth`: missing, invalid or unauthorised key; never retried.
 * - `context_overflow`: the request does not fit the model's context window; compaction can help.
 * - `invalid_request`: the request itself is wrong (400, 404, 413, 422); not retried.
 * - `other`: anything else.
 */
export type ModelErrorKind =
  | "overloaded"
  | "rate_limited"
  | "server"
  | "network"
  | "billing"
  | "auth"
  | "context_overflow"
  | "invalid_request"
  | "other";

const transientKinds: ReadonlySet<ModelErrorKind> = new Set([
  "overloaded",
  "rate_limited",
  "server",
  "network",
]);

export interface ModelApiErrorOptions extends CordonErrorOptions {
  kind: ModelErrorKind;
  /** HTTP status, when the API answered. */
  status?: number | undefined;
  /** How long the API asked us to wait before retrying, in milliseconds. */
  retryAfterMs?: number | undefined;
  /** The API's request id, for support tickets. */
  requestId?: string | undefined;
}

/** A model call failed; `kind` tells the loop which guard (if any) applies. */
export class ModelApiError extends ModelError {
  readonly kind: ModelErrorKind;
  readonly status: number | undefined;
  readonly retryAfterMs: number | undefined;
  readonly requestId: string | undefined;

  constructor(message: string, options: ModelApiErrorOptions) {
    super(message, options);
    this.kind = options.kind;
    this.status = options.status;
    this.retryAfterMs = options.retryAfterMs;
    this.requestId = options.requestId;
  }

  /** True for failures that may go away by waiting: overload, rate limit, 5xx, network. */
  get transient(): boolean {
    return transientKinds.has(this.kind);
  }

  static isKind(value: unknown, kind: ModelErrorKind): value is ModelApiError {
    return value instanceof ModelApiError && value.kind === kind;
  }
}

/** The remedy we print for each kind. */
export function fixForKind(kind: ModelErrorKind): string {
  switch (kind) {
    case "overloaded":
      return "The model API is overloaded; try again in a minute, or configure a fallback model (model.fallbacks).";
    case "rate_limited":
      return "You hit the API rate limit; wait a minute, lower concurrency, or configure a fallback model (model.fallbacks).";
    case "server":
      return "The model API had an internal error; try again shortly.";
    case "network":
      return "Check your network connection and ANTHROPIC_BASE_URL, then try again.";
    case "billing":
      return "Check your credit balance and spend limits in the Anthropic console; cordon will not retry this.";
    case "auth":
      return "Set a valid ANTHROPIC_API_KEY (or model.apiKey) and try again.";
    case "context_overflow":
      return "Start a new session (--session NAME) or shorten the prompt and AGENTS.md.";
    case "invalid_request":
      return "Check the model name (--model) and settings; run with CORDON_LOG_LEVEL=debug to see the request.";
    case "other":
      return "Run with CORDON_LOG_LEVEL=debug for details and try again.";
  }
}
