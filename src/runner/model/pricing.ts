import type { ModelUsage } from "./types.js";

/**
 * What model calls cost, estimated from Anthropic's list prices. The one place prices live: update
 * this table (and `pricesAsOf`) when Anthropic changes them. Only models on the published price
 * list are here; any other id (a gateway's own name, a scripted model, a model newer than this
 * table) gets no price, and a run that used one reports its cost as unknown rather than guessed.
 *
 * Sources: platform.claude.com/docs/en/about-claude/pricing ("Model pricing") and the per-model
 * overview pages, read on `pricesAsOf`. List prices on the Claude API: no batch discount, no
 * `inference_geo` surcharge, 5-minute cache writes (cordon asks for no other TTL).
 */

/** The day the table was checked against the published prices. */
export const pricesAsOf = "2026-11-24";

/** USD per million tokens. */
export interface ModelPrice {
  input: number;
  output: number;
  /** 5-minute prompt-cache writes. */
  cacheWrite: number;
  /** Prompt-cache hits and refreshes. */
  cacheRead: number;
}

/** A price with a second band for long prompts (Haiku 5.5 bills a whole request by its size). */
interface PriceEntry extends ModelPrice {
  longPrompt?: {
    /** Above this many prompt tokens (input + cache reads + cache writes) `price` applies. */
    aboveTokens: number;
    price: ModelPrice;
  };
}

const fable: ModelPrice = { input: 10, output: 50, cacheWrite: 12.5, cacheRead: 1 };
const opus5: ModelPrice = { input: 5, output: 25, cacheWrite: 6.25, cacheRead: 0.5 };
const opus4: ModelPrice = { input: 15, output: 75, cacheWrite: 18.75, cacheRead: 1.5 };
const sonnet5: ModelPrice = { input: 2, output: 10, cacheWrite: 2.5, cacheRead: 0.2 };
const sonnet4: ModelPrice = { input: 3, output: 15, cacheWrite: 3.75, cacheRead: 0.3 };

/** By model id without its date suffix (the API answers `claude-sonnet-4-5-20250929`). */
const prices: Readonly<Record<string, PriceEntry>> = {
  "claude-fable-5-1": { ...fable, cacheRead: 0.25 },
  "claude-mythos-5-1": { ...fable, cacheRead: 0.25 },
  "claude-fable-5": fable,
  "claude-mythos-5": fable,
  "claude-opus-5-5": { input: 4, output: 20, cacheWrite: 5, cacheRead: 0.2 },
  "claude-opus-5": opus5,
  "claude-opus-4-8": opus5,
  "claude-opus-4-7": opus5,
  "claude-opus-4-6": opus5,
  "claude-opus-4-5": opus5,
  "claude-opus-4-1": opus4,
  "claude-opus-4": opus4,
  "claude-opus-4-0": opus4,
  // Cache hits cut from $0.20 to $0.10 on 2026-10-07.
  "claude-sonnet-5-5": { ...sonnet5, cacheRead: 0.1 },
  "claude-sonnet-5": sonnet5,
  "claude-sonnet-4-6": sonnet4,
  "claude-sonnet-4-5": sonnet4,
  "claude-sonnet-4": sonnet4,
  "claude-sonnet-4-0": sonnet4,
  "claude-haiku-5-5": {
    input: 0.1,
    output: 0.5,
    cacheWrite: 0.125,
    cacheRead: 0.01,
    longPrompt: {
      aboveTokens: 100_000,
      price: { input: 0.5, output: 2.5, cacheWrite: 0.625, cacheRead: 0.05 },
    },
  },
  "claude-haiku-4-5": { input: 1, output: 5, cacheWrite: 1.25, cacheRead: 0.1 },
};

/** The list price of one call to `model` with this usage, or undefined for an unknown model. */
export function priceOf(model: string, usage: ModelUsage): ModelPrice | undefined {
  const entry = prices[model.replace(/-\d{8}$/, "")];
  if (!entry) return undefined;
  const prompt = usage.inputTokens + usage.cacheReadTokens + usage.cacheWriteTokens;
  return entry.longPrompt && prompt > entry.longPrompt.aboveTokens ? entry.longPrompt.price : entry;
}

/** The estimated cost of one call in USD, or undefined for an unknown model. */
export function callCostUsd(model: string, usage: ModelUsage): number | undefined {
  const price = priceOf(model, usage);
  if (!price) return undefined;
  return (
    (usage.inputTokens * price.input +
      usage.outputTokens * price.output +
      usage.cacheWriteTokens * price.cacheWrite +
      usage.cacheReadTokens * price.cacheRead) /
    1_000_000
  );
}

/** The estimated cost of a run. */
export interface RunCost {
  /**
   * USD at Anthropic's list prices, summed over every model call; null when a call went to a model
   * with no known price (then `reason` says which), since a partial sum would read as the bill.
   */
  usd: number | null;
  /** Why `usd` is null. */
  reason?: string;
}

/** Adds up the cost of a run's model calls, each priced by the model that answered it. */
export class CostMeter {
  #usd = 0;
  readonly #unpriced = new Set<string>();

  add(model: string, usage: ModelUsage): void {
    const cost = callCostUsd(model, usage);
    if (cost === undefined) this.#unpriced.add(model);
    else this.#usd += cost;
  }

  get cost(): RunCost {
    if (this.#unpriced.size === 0) return { usd: roundUsd(this.#usd) };
    const models = [...this.#unpriced].map((model) => `"${model}"`).join(", ");
    return {
      usd: null,
      reason: `cordon has no price for ${models} (its table, as of ${pricesAsOf}, lists Anthropic's Claude models)`,
    };
  }
}

/** Micro-dollars are plenty for an estimate and keep JSON free of float noise. */
function roundUsd(usd: number): number {
  return Math.round(usd * 1_000_000) / 1_000_000;
}

/** A cost for people: "~$0.0123", "~$1.37", or "cost unknown" (the `~` says it is an estimate). */
export function formatCost(cost: RunCost): string {
  if (cost.usd === null) return "cost unknown";
  return `~$${cost.usd < 1 ? cost.usd.toFixed(4) : cost.usd.toFixed(2)}`;
}
