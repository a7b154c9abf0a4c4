import { sandboxesHeld } from "../session/index.js";
import type { RunPlan } from "../../policy/index.js";
import type { SandboxProvider } from "./sandbox-provider.js";

/**
 * What to do with a sandbox once the work that used it is over: `stop` it (its processes end, its
 * private workspace and the container stay, and the next acquire starts it again), `remove` it
 * (container and private copy, as `cordon run --rm`), or `keep` it running for the next run.
 */
export type SandboxDisposalMode = "stop" | "remove" | "keep";

/** What became of one sandbox. */
export interface SandboxDisposal {
  /** Its container's name. */
  sandbox: string;
  /**
   * `stopped`, `removed`; `kept` (running: `reason` says why, e.g. the live run of another process
   * holding it, or `keep` asked for); `absent` (nothing was running, or nothing was there).
   */
  outcome: "stopped" | "removed" | "kept" | "absent";
  reason?: string | undefined;
}

/**
 * Stops or removes the sandbox `plan` names — the one place that decides whether that may happen
 * now (the library's `close()` and `rm`, the CLI's `--rm`): never while a live run of any process
 * holds it by its session lock (a sandbox shared by scope `agent` or `shared`), and no stop while
 * commands run in it (another process's `cordon exec -it` shell). A removal asked for goes ahead. Undefined when
 * the plan has no sandbox (mode off: nothing runs once the run is over).
 */
export async function disposeSandbox(options: {
  sandboxes: SandboxProvider;
  plan: RunPlan;
  mode: SandboxDisposalMode;
  stateDir: string;
}): Promise<SandboxDisposal | undefined> {
  const { plan, sandboxes } = options;
  const spec = plan.sandbox.spec;
  if (!plan.sandbox.enabled || !spec) return undefined;
  const sandbox = spec.containerName;
  if (options.mode === "keep") return { sandbox, outcome: "kept", reason: "keep was asked for" };
  const held = await sandboxesHeld(options.stateDir);
  const holder = held.holderOf({ name: sandbox, session: spec.sessionKey });
  if (holder) return { sandbox, outcome: "kept", reason: holder };
  if (options.mode === "remove") {
    if (!sandboxes.discard) return { sandbox, outcome: "kept", reason: "its backend keeps it" };
    await sandboxes.discard(plan, {});
    return { sandbox, outcome: "removed" };
  }
  if (!sandboxes.stop) return { sandbox, outcome: "kept", reason: "its backend cannot stop it" };
  // A stop is a courtesy (the next acquire starts it again): it never ends commands running there.
  const [running] = (await sandboxes.commandsIn?.(plan)) ?? [];
  if (running !== undefined) {
    return { sandbox, outcome: "kept", reason: `commands run in it (${cutCommand(running)})` };
  }
  return { sandbox, outcome: (await sandboxes.stop(plan)) ? "stopped" : "absent" };
}

function cutCommand(command: string): string {
  return command.length > 60 ? `${command.slice(0, 59)}…` : command;
}
