import type { AgentRuntimeConfig, AgentRuntimeName } from "../config/index.js";

/**
 * The agent program of a run (docs/runtimes.md), decided once in the plan: cordon's own loop,
 * Claude Code in the sandbox, or a command. The runner makes the program this names and asks
 * the config nothing more.
 */
export type PlannedRuntime = {
  /** Where it was decided: `--runtime`, `agents.list[<i>].runtime`, `agents.defaults.runtime`. */
  configKey: string;
} & (
  | { name: "cordon" }
  | {
      name: "claude-code";
      /**
       * Sandboxed, Claude Code calls the model through cordon's gateway (a forwarded port; the
       * egress proxy is kept) and runs from its agent image unless the config or project names one.
       */
      gateway: boolean;
    }
  | {
      name: "command";
      /** The program and its arguments, run in the sandbox. */
      command: string[];
      /** How the task reaches it: as its last argument, or on stdin. */
      prompt: "argument" | "stdin";
    }
);

export interface AgentRuntimeInput {
  /** The run's `--runtime`, over every config layer. */
  flag?: AgentRuntimeName | undefined;
  /** The agent's own `runtime` and its key, when set. */
  own?: { value: AgentRuntimeConfig; configKey: string } | undefined;
  /** `agents.defaults.runtime`, when set. */
  defaults?: AgentRuntimeConfig | undefined;
  /** Whether the run is sandboxed (the gateway needs a sandbox to forward a port into). */
  sandboxed: boolean;
}

/** `--runtime`, else the agent's own `runtime`, else the defaults', else cordon's loop. */
export function planAgentRuntime(input: AgentRuntimeInput): PlannedRuntime {
  const [value, configKey]: [AgentRuntimeConfig, string] =
    input.flag !== undefined
      ? [input.flag, "--runtime"]
      : input.own !== undefined
        ? [input.own.value, input.own.configKey]
        : input.defaults !== undefined
          ? [input.defaults, "agents.defaults.runtime"]
          : ["cordon", "built-in default; set agents.defaults.runtime"];
  if (typeof value === "object") {
    return {
      name: "command",
      configKey,
      command: [...value.command],
      prompt: value.prompt ?? "argument",
    };
  }
  if (value === "claude-code") return { name: "claude-code", configKey, gateway: input.sandboxed };
  return { name: "cordon", configKey };
}

/** The runtime line of `explain`. */
export function describeRuntime(runtime: PlannedRuntime): string {
  switch (runtime.name) {
    case "cordon":
      return `cordon's own agent loop (${runtime.configKey})`;
    case "claude-code":
      return `claude-code in the sandbox (${runtime.configKey}); ${runtime.gateway ? "its model calls go through cordon's model gateway" : 'not sandboxed, so it has no model gateway to call and the run fails (sandbox.mode "all" sandboxes it)'}`;
    case "command":
      return `command ${JSON.stringify(runtime.command)}, the task ${runtime.prompt === "stdin" ? "on stdin" : "as its last argument"} (${runtime.configKey})`;
  }
}
