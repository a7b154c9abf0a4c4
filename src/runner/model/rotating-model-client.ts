import type { Logger } from "../../common/index.js";
import { describeKey, type ApiKey } from "./api-keys.js";
import { afterRefusal, afterSuccess, keyOrder, type KeyUsage, type KeyUsages } from "./key-pool.js";
import { memoryKeyStateStore, type KeyStateStore } from "./key-state-file.js";
import { ModelApiError, type ModelErrorKind } from "./model-errors.js";
import type { ModelClient, ModelRequest, ModelRetryEvent, ModelStreamEvent } from "./types.js";

/** Refusals that say something about the key, so another key may get through. */
const keyRefusals: ReadonlySet<ModelErrorKind> = new Set([
  "rate_limited",
  "overloaded",
  "auth",
  "billing",
]);

export interface RotatingModelClientOptions {
  /** Two or more keys, in the user's order. */
  keys: readonly ApiKey[];
  /** The client that sends requests with one key (built once per key). */
  clientFor: (key: ApiKey) => ModelClient;
  /** The keys' recorded use; default this process's memory only. */
  store?: KeyStateStore | undefined;
  logger?: Logger | undefined;
}

/**
 * A model client over several API keys (key-pool.ts decides the order). Each request goes out with
 * the key used longest ago that is not cooling down; when the API refuses it before any of the
 * answer arrived (429, 529, 401, 403, billing) that key cools down and the next one is tried at
 * once, announced by a `retry` event with no wait. A refusal the key's own client would retry
 * after a wait (429, 529) is retried that way only when no other key is ready; a 5xx or network
 * failure is not the key's fault and is retried by the key's client as with one key. When every
 * key was refused, the last refusal is thrown for the loop's own guards (retry, fallback models),
 * or, when every key was rejected as unauthorised, one error that says so. Keys are named by
 * variable and short hash in every event, log line and message, never by value.
 */
export class RotatingModelClient implements ModelClient {
  readonly provider: string;
  readonly #keys: readonly ApiKey[];
  readonly #clients = new Map<string, ModelClient>();
  readonly #store: KeyStateStore;
  readonly #fallbackStore = memoryKeyStateStore();
  readonly #logger: Logger | undefined;

  constructor(options: RotatingModelClientOptions) {
    this.#keys = options.keys;
    for (const key of options.keys) this.#clients.set(key.id, options.clientFor(key));
    this.provider = this.#clients.values().next().value?.provider ?? "anthropic";
    this.#store = options.store ?? this.#fallbackStore;
    this.#logger = options.logger;
  }

  async *stream(request: ModelRequest): AsyncGenerator<ModelStreamEvent> {
    const tried = new Set<string>();
    const refusals: { key: ApiKey; error: ModelApiError }[] = [];
    let picked = await this.#pick(tried);
    while (picked) {
      const { key, failedBefore } = picked;
      tried.add(key.id);
      const client = this.#clients.get(key.id);
      if (!client) break;
      let next: Picked | undefined;
      let answered = false;
      try {
        for await (const event of client.stream(request)) {
          // The client would wait and ask again with the same key; another key may be free now.
          if (event.type === "retry" && !answered && keyRefusals.has(event.reason)) {
            await this.#refused(key, event.delayMs);
            next = await this.#pick(tried);
            if (next) {
              yield switching(
                key,
                next.key,
                event.error,
                event.reason,
                event.status,
                tried.size,
                this.#keys.length,
              );
              break;
            }
          }
          if (event.type !== "retry") answered = true;
          yield event;
        }
      } catch (error) {
        if (answered || !(error instanceof ModelApiError) || !keyRefusals.has(error.kind)) {
          throw error;
        }
        refusals.push({ key, error });
        await this.#refused(key, error.retryAfterMs);
        next = await this.#pick(tried);
        if (!next) break;
        yield switching(
          key,
          next.key,
          error.message,
          error.kind,
          error.status,
          tried.size,
          this.#keys.length,
        );
      }
      if (!next) {
        // Most requests change nothing here; only a key that had been refused is written back.
        if (failedBefore) await this.#record(key, (usage) => afterSuccess(usage));
        return;
      }
      picked = next;
    }
    throw exhausted(refusals);
  }

  async #refused(key: ApiKey, retryAfterMs: number | undefined): Promise<void> {
    this.#logger?.debug({ key: describeKey(key) }, "the model API refused this key");
    await this.#record(key, (usage, now) => afterRefusal(usage, now, retryAfterMs));
  }

  /**
   * The next key to try, marked as used now: the first ready key not yet tried; when no key was
   * ready to begin with, the one whose cooldown ends soonest (a run does not fail on a record
   * alone). Undefined when nothing is left to try.
   */
  async #pick(tried: ReadonlySet<string>): Promise<Picked | undefined> {
    return this.#update((usages, now) => {
      const { ready, cooling } = keyOrder(this.#keys, usages, now);
      const key =
        ready.find((candidate) => !tried.has(candidate.id)) ??
        (tried.size === 0 ? cooling[0] : undefined);
      if (!key) return undefined;
      const usage = usages[key.id] ?? {};
      usages[key.id] = { ...usage, lastUsed: now };
      return { key, failedBefore: (usage.failures ?? 0) > 0 };
    });
  }

  async #record(key: ApiKey, next: (usage: KeyUsage, now: number) => KeyUsage): Promise<void> {
    await this.#update((usages, now) => {
      usages[key.id] = next(usages[key.id] ?? {}, now);
    });
  }

  /** The shared record when it can be used, else this process's own: keys still take turns. */
  async #update<T>(change: (usages: KeyUsages, now: number) => T): Promise<T> {
    try {
      return await this.#store.update(change);
    } catch (error) {
      this.#logger?.warn(
        { err: error },
        "the shared record of API key use could not be updated; this process keeps its own",
      );
      return this.#fallbackStore.update(change);
    }
  }
}

interface Picked {
  key: ApiKey;
  /** The key had been refused before (by this process or another). */
  failedBefore: boolean;
}

/** The `retry` event of a switch to another key: at once, no wait. */
function switching(
  from: ApiKey,
  to: ApiKey,
  error: string,
  reason: ModelErrorKind,
  status: number | undefined,
  attempt: number,
  keys: number,
): ModelRetryEvent {
  return {
    type: "retry",
    attempt,
    maxRetries: keys - 1,
    reason,
    status,
    delayMs: 0,
    error: `${error} (key ${describeKey(from)}); trying key ${describeKey(to)}`,
  };
}

/** The error after every key was refused. */
function exhausted(refusals: readonly { key: ApiKey; error: ModelApiError }[]): Error {
  const last = refusals.at(-1);
  if (!last) {
    return new ModelApiError("No API key is left to try.", { kind: "auth" });
  }
  if (refusals.length > 1 && refusals.every((refusal) => refusal.error.kind === "auth")) {
    const names = refusals.map((refusal) => describeKey(refusal.key)).join(", ");
    return new ModelApiError(`The model API rejected every API key: ${names}.`, {
      kind: "auth",
      status: last.error.status,
      requestId: last.error.requestId,
      fix: "Replace the rejected keys in ANTHROPIC_API_KEYS (or the variables model.apiKeyEnv names) with valid ones.",
      cause: last.error,
    });
  }
  return last.error;
}
