import Anthropic from "@anthropic-ai/sdk";
import { retryAfter } from "./anthropic-errors.js";

/**
 * The transport retry policy of `AnthropicModelClient`. cordon retries itself instead of letting
 * the SDK do it (`maxRetries: 0` on the SDK client): the SDK's retries are invisible, and a user
 * watching a run stall for half a minute on a 529 deserves a `retry` event saying why. The policy
 * is the SDK's own (1.x `shouldRetry` / `retryRequest`), so turning it off loses nothing:
 * connection failures and 408, 409, 429, 5xx (529 included) are retried, the server's
 * `x-should-retry` header overrules the status, the wait is the server's `retry-after-ms` /
 * `retry-after` when it gives one, else exponential backoff from 0.5 s to 8 s with up to 25 %
 * jitter. Two additions: an `overloaded_error` or `api_error` sent as an SSE event before any
 * content is retried too (the SDK gives up on those), and a server's wait is capped at
 * `maxRetryWaitMs` so a run never sleeps for an hour on one header.
 */

/** Longest wait taken from a `retry-after` header, in milliseconds. */
export const maxRetryWaitMs = 60_000;

const initialBackoffMs = 500;
const maxBackoffMs = 8_000;
const retryableStatuses: ReadonlySet<number> = new Set([408, 409, 429]);
const retryableStreamErrorTypes: ReadonlySet<string> = new Set(["overloaded_error", "api_error"]);

/**
 * How long to wait before retry number `retry` (1 for the first) after the SDK threw `error`, in
 * milliseconds; undefined when the error must not be retried (a 4xx, an abort, a billing refusal).
 */
export function transportRetryWaitMs(
  error: unknown,
  retry: number,
  random: () => number = Math.random,
): number | undefined {
  if (error instanceof Anthropic.APIUserAbortError) return undefined;
  if (error instanceof Anthropic.APIConnectionError) return backoffMs(retry, random);
  if (!(error instanceof Anthropic.APIError)) return undefined;
  const status = error.status as number | undefined;
  const headers = error.headers as Headers | undefined;
  if (status === undefined) {
    // An `error` event inside the SSE stream: no status, no headers, only the error's type.
    return retryableStreamErrorTypes.has(String(error.type)) ? backoffMs(retry, random) : undefined;
  }
  const serverSays = headers?.get("x-should-retry");
  if (serverSays === "false") return undefined;
  if (serverSays !== "true" && !retryableStatuses.has(status) && status < 500) return undefined;
  const asked = retryAfter(headers);
  return asked !== undefined && asked > 0
    ? Math.min(asked, maxRetryWaitMs)
    : backoffMs(retry, random);
}

function backoffMs(retry: number, random: () => number): number {
  const base = Math.min(initialBackoffMs * 2 ** (retry - 1), maxBackoffMs);
  return Math.round(base * (1 - random() * 0.25));
}
