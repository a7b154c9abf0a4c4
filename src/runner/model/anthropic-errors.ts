import Anthropic from "@anthropic-ai/sdk";
import { AbortedError } from "../../common/index.js";
import { fixForKind, ModelApiError, type ModelErrorKind } from "./model-errors.js";

const contextOverflowPattern =
  /prompt is too long|context window|context length|maximum context|too many (input )?tokens|exceeds? .*context/i;
const billingPattern = /credit balance|spend limit|billing|usage limit|quota/i;

/**
 * Maps anything the SDK throws to a cordon error: `AbortedError` for an abort we asked for,
 * otherwise a `ModelApiError` whose `kind` drives the loop's guards.
 */
export function fromSdkError(error: unknown, signal?: AbortSignal): Error {
  if (signal?.aborted || error instanceof Anthropic.APIUserAbortError) {
    return new AbortedError("the model request was aborted", { cause: error });
  }
  if (error instanceof ModelApiError || error instanceof AbortedError) return error;
  if (error instanceof Anthropic.APIConnectionError) {
    return make("network", `could not reach the model API: ${error.message}`, error);
  }
  if (error instanceof Anthropic.APIError) {
    const api = apiErrorOf(error);
    const kind = kindOf(api);
    const detail = api.apiMessage ?? api.message;
    const retryAfterMs = kind === "rate_limited" ? retryAfter(api.headers) : undefined;
    return make(kind, describe(kind, detail), error, retryAfterMs);
  }
  if (error instanceof Anthropic.AnthropicError) {
    return make("other", `the model client failed: ${error.message}`, error);
  }
  return make(
    "other",
    `the model call failed: ${error instanceof Error ? error.message : String(error)}`,
    error,
  );
}

/** The fields we use, typed: the SDK's generic defaults leak `any`. */
interface ApiErrorFields {
  status: number | undefined;
  headers: Headers | undefined;
  type: string | null;
  apiMessage: string | null;
  message: string;
  requestID: string | null | undefined;
}

function apiErrorOf(error: unknown): ApiErrorFields {
  return error as ApiErrorFields;
}

function kindOf(error: ApiErrorFields): ModelErrorKind {
  const status = error.status;
  const type = error.type;
  const text = error.apiMessage ?? error.message;
  if (type === "billing_error" || status === 402) return "billing";
  if (billingPattern.test(text) && (status === 400 || status === 429 || status === 403)) {
    return "billing";
  }
  if (type === "overloaded_error" || status === 529) return "overloaded";
  if (type === "rate_limit_error" || status === 429) return "rate_limited";
  if (type === "authentication_error" || type === "permission_error") return "auth";
  if (status === 401 || status === 403) return "auth";
  if (status === 413 || contextOverflowPattern.test(text)) return "context_overflow";
  if (type === "api_error" || type === "timeout_error" || (status !== undefined && status >= 500)) {
    return "server";
  }
  if (type === "invalid_request_error" || type === "not_found_error") return "invalid_request";
  if (status !== undefined && status >= 400 && status < 500) return "invalid_request";
  return "other";
}

function describe(kind: ModelErrorKind, detail: string): string {
  const lead: Record<ModelErrorKind, string> = {
    overloaded: "The model API is overloaded",
    rate_limited: "The model API rate limit was hit",
    server: "The model API had an internal error",
    network: "The model API could not be reached",
    billing: "The model API refused the request for billing reasons",
    auth: "The model API rejected the credentials",
    context_overflow: "The conversation no longer fits the model's context window",
    invalid_request: "The model API rejected the request",
    other: "The model call failed",
  };
  return `${lead[kind]}: ${detail}`;
}

function make(
  kind: ModelErrorKind,
  message: string,
  cause: unknown,
  retryAfterMs?: number,
): ModelApiError {
  const api = cause instanceof Anthropic.APIError ? apiErrorOf(cause) : undefined;
  const status = api?.status;
  const requestId = api?.requestID;
  return new ModelApiError(message, {
    kind,
    status,
    retryAfterMs,
    requestId: requestId ?? undefined,
    fix: fixForKind(kind),
    cause,
  });
}

/** `retry-after-ms` or `retry-after` (seconds or an HTTP date), in milliseconds. */
export function retryAfter(headers: Headers | undefined): number | undefined {
  const ms = headers?.get("retry-after-ms");
  if (ms && Number.isFinite(Number(ms))) return Math.max(0, Number(ms));
  const value = headers?.get("retry-after");
  if (!value) return undefined;
  const seconds = Number(value);
  if (Number.isFinite(seconds)) return Math.max(0, seconds * 1000);
  const date = Date.parse(value);
  return Number.isNaN(date) ? undefined : Math.max(0, date - Date.now());
}
