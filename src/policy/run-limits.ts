import { configDefaults, type ThinkingLevel } from "../config/index.js";
import type { PlannedRuntime } from "./agent-runtime.js";

/**
 * The limits of a run, each decided once here and carried in the plan (`RunPlan.limits`); the
 * loop, compaction and the runtimes read them and decide nothing. `keys` says where each came
 * from, for `explain`.
 */
export interface PlannedLimits {
  /**
   * Most model calls of the run; absent when the runtime keeps its own count (Claude Code is
   * given one only when the run sets it) or has none (a command).
   */
  maxTurns?: number | undefined;
  /** Token budget of the run (input + output, summed over calls); absent = none. */
  maxTokens?: number | undefined;
  /** Wall-clock limit of the run, in ms; absent = none. */
  timeoutMs?: number | undefined;
  /** Most output tokens of one model response (raised to fit a thinking budget). */
  maxOutputTokens: number;
  /** Longest one tool call may run before it is stopped, in ms; 0 = no limit. */
  toolTimeoutMs: number;
  /** The model's context window, in tokens: a request that would not fit is compacted first. */
  contextWindowTokens: number;
  /** Thinking level; absent = off. */
  thinking?: ThinkingLevel | undefined;
  /** The config key, flag or built-in default that decided each limit. */
  keys: Record<Exclude<keyof PlannedLimits, "keys">, string>;
}

/** The limits a run gets when nothing sets them (the loop's own, for a caller without a plan). */
export const builtinLimits = {
  maxTurns: 50,
  maxOutputTokens: 8192,
  toolTimeoutMs: configDefaults.tools.callTimeoutSec * 1000,
  contextWindowTokens: configDefaults.contextWindowTokens,
} as const;

/** What one run asks for over the config (`--max-turns`, `--timeout`, `--thinking`): the last layer. */
export interface RunLimitsRequest {
  maxTurns?: number | undefined;
  maxTokens?: number | undefined;
  timeoutMs?: number | undefined;
  maxOutputTokens?: number | undefined;
  toolTimeoutMs?: number | undefined;
  thinking?: ThinkingLevel | undefined;
}

/** A value the config gave, with its key; absent when the config does not set it. */
interface Configured<T> {
  value: T;
  configKey: string;
}

export interface LimitsInput {
  /** The agent program: only cordon's own loop counts turns by default. */
  runtime: PlannedRuntime["name"];
  /** `tools.callTimeoutSec` as the agent resolves it (always set: the schema has a default). */
  callTimeoutSec: Configured<number>;
  /** `agents.*.contextWindow`, when set. */
  contextWindow?: Configured<number> | undefined;
  /** `agents.*.thinking`, when set. */
  thinking?: Configured<ThinkingLevel> | undefined;
  /** The run's own limits, over everything else. */
  run?: RunLimitsRequest | undefined;
}

/** The flag (or option) a run sets each limit with, named in `keys` when it did. */
const runKeys: Record<keyof RunLimitsRequest, string> = {
  maxTurns: "--max-turns",
  maxTokens: "the run's limits.maxTokens",
  timeoutMs: "--timeout",
  maxOutputTokens: "the run's limits.maxOutputTokens",
  toolTimeoutMs: "the run's limits.toolTimeoutMs",
  thinking: "--thinking",
};

/** The run's flags, else the config, else the built-in defaults. */
export function planLimits(input: LimitsInput): PlannedLimits {
  const run = input.run ?? {};
  const pick = <K extends keyof RunLimitsRequest, T>(
    field: K,
    configured: Configured<T> | undefined,
    fallback: { value: T; configKey: string },
  ): { value: T | NonNullable<RunLimitsRequest[K]>; configKey: string } => {
    const own = run[field];
    return own !== undefined ? { value: own, configKey: runKeys[field] } : (configured ?? fallback);
  };
  const maxTurns = pick(
    "maxTurns",
    undefined,
    {
      cordon: { value: builtinLimits.maxTurns, configKey: "built-in default; --max-turns" },
      "claude-code": {
        value: undefined,
        configKey: "claude-code's own; --max-turns passes one on",
      },
      command: { value: undefined, configKey: "a command runtime has no turns" },
    }[input.runtime],
  );
  const maxTokens = pick("maxTokens", undefined, { value: undefined, configKey: "none" });
  const timeoutMs = pick("timeoutMs", undefined, {
    value: undefined,
    configKey: "none; --timeout",
  });
  const maxOutputTokens = pick("maxOutputTokens", undefined, {
    value: builtinLimits.maxOutputTokens,
    configKey: "built-in default",
  });
  const toolTimeoutMs = pick(
    "toolTimeoutMs",
    {
      value: input.callTimeoutSec.value * 1000,
      configKey: input.callTimeoutSec.configKey,
    },
    { value: builtinLimits.toolTimeoutMs, configKey: "built-in default" },
  );
  const contextWindow = input.contextWindow ?? {
    value: builtinLimits.contextWindowTokens,
    configKey: "built-in default; set agents.defaults.contextWindow",
  };
  const thinking = pick("thinking", input.thinking, {
    value: undefined,
    configKey: "built-in default; set agents.defaults.thinking",
  });
  const limits: PlannedLimits = {
    maxOutputTokens: maxOutputTokens.value,
    toolTimeoutMs: toolTimeoutMs.value,
    contextWindowTokens: contextWindow.value,
    keys: {
      maxTurns: maxTurns.configKey,
      maxTokens: maxTokens.configKey,
      timeoutMs: timeoutMs.configKey,
      maxOutputTokens: maxOutputTokens.configKey,
      toolTimeoutMs: toolTimeoutMs.configKey,
      contextWindowTokens: contextWindow.configKey,
      thinking: thinking.configKey,
    },
  };
  if (maxTurns.value !== undefined) limits.maxTurns = maxTurns.value;
  if (maxTokens.value !== undefined) limits.maxTokens = maxTokens.value;
  if (timeoutMs.value !== undefined) limits.timeoutMs = timeoutMs.value;
  if (thinking.value !== undefined) limits.thinking = thinking.value;
  return limits;
}

/** The limits lines of `explain`, each with the key that decided it. */
export function describeLimits(limits: PlannedLimits): string[] {
  const { keys } = limits;
  const seconds = (ms: number) => `${ms / 1000} s`;
  return [
    `  turns        ${limits.maxTurns ?? "not counted by cordon"} (${keys.maxTurns})`,
    `  tokens       ${limits.maxTokens === undefined ? "no budget" : `${limits.maxTokens} for the run`} (${keys.maxTokens}); ${limits.maxOutputTokens} a response (${keys.maxOutputTokens})`,
    `  time         ${limits.timeoutMs === undefined ? "no limit" : seconds(limits.timeoutMs)} (${keys.timeoutMs})`,
    `  tool call    ${limits.toolTimeoutMs === 0 ? "no limit" : seconds(limits.toolTimeoutMs)} (${keys.toolTimeoutMs})`,
    `  context      ${limits.contextWindowTokens} tokens (${keys.contextWindowTokens})`,
    `  thinking     ${limits.thinking ?? "off"} (${keys.thinking})`,
  ];
}
