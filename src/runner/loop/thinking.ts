import { thinkingLevels, type ThinkingLevel } from "../../config/index.js";
import type { ThinkingOptions } from "../model/index.js";

/** How much the model may think before it answers, from none to the most we ask for. */
export { thinkingLevels, type ThinkingLevel };

/**
 * The thinking budget of each level, in tokens (docs/configuration.md repeats this table).
 * 1024 is the API's minimum; the others follow OpenClaw's ladder, each about twice the last.
 */
export const thinkingBudgets: Readonly<Record<Exclude<ThinkingLevel, "off">, number>> = {
  minimal: 1024,
  low: 4096,
  medium: 10_000,
  high: 24_000,
  xhigh: 32_000,
};

/**
 * What the loop asks for: a level (stepped down one at a time when the API rejects it) or an
 * embedder's raw budget (dropped at once, there is no ladder to step down).
 */
export type ThinkingSetting = ThinkingLevel | ThinkingOptions;

export function isThinkingLevel(value: unknown): value is ThinkingLevel {
  return typeof value === "string" && (thinkingLevels as readonly string[]).includes(value);
}

/** The request's thinking options for a setting; undefined when thinking is off. */
export function thinkingOptionsOf(
  setting: ThinkingSetting | undefined,
): ThinkingOptions | undefined {
  if (setting === undefined || setting === "off") return undefined;
  if (typeof setting === "string") return { budgetTokens: thinkingBudgets[setting] };
  return setting;
}

/** The next lower setting, or undefined once thinking is off (nothing left to step down). */
export function lowerThinking(setting: ThinkingSetting | undefined): ThinkingSetting | undefined {
  if (setting === undefined || setting === "off") return undefined;
  if (typeof setting !== "string") return "off";
  return thinkingLevels[thinkingLevels.indexOf(setting) - 1];
}

/** Output tokens left for the answer itself when thinking takes part of max_tokens. */
const answerTokens = 4096;

/**
 * max_tokens of a request: the API counts thinking inside it and wants it above the budget, so
 * a budget that would crowd out the answer raises it (to budget + 4096) instead of failing.
 */
export function maxTokensFor(
  maxOutputTokens: number,
  thinking: ThinkingOptions | undefined,
): number {
  if (!thinking) return maxOutputTokens;
  return Math.max(maxOutputTokens, thinking.budgetTokens + answerTokens);
}
