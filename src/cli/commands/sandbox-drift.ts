import { messageOf, type Logger } from "../../common/index.js";
import { createRunner } from "../../runner/index.js";
import type { SandboxSummary } from "../../sandbox/index.js";

/** Whether a sandbox still matches what an acquire would ask for now, and if not, why. */
export interface SandboxDrift {
  /** true: the next acquire recreates it (once idle); false: it is current; null: cannot tell. */
  drifted: boolean | null;
  /** Each difference, or why cordon cannot tell. */
  reasons: string[];
  /** The config hash the current config gives this sandbox, when it could be planned. */
  expectedConfigHash?: string | undefined;
}

export interface DriftOptions {
  env: NodeJS.ProcessEnv;
  /** `--config`: the file `cordon run` would be given; default: each project's own lookup. */
  configPath?: string | undefined;
  logger: Logger;
}

const waitingMember =
  "a warm pool member (docs/pool.md): only a new sandbox of its shape and image takes it, and prune removes it when none does";

type Planned = { containerName: string; configHash: string } | { unsandboxed: true } | Error;

/**
 * Compares each sandbox with the current config and image, as the next acquire would: its project
 * is planned again (the config found from its workspace, as `cordon run` there finds it, for its
 * agent and session) and the config hash compared with the container's; the image is current when
 * its tag is the one an acquire resolves now and still names the image the container runs. Planning
 * only reads the config (a discovered file may only tighten until trusted): nothing runs.
 */
export async function driftOf(
  sandboxes: readonly SandboxSummary[],
  options: DriftOptions,
): Promise<Map<string, SandboxDrift>> {
  const runners = new Map<string, ReturnType<typeof createRunner>>();
  const drift = new Map<string, SandboxDrift>();
  for (const sandbox of sandboxes) {
    if (sandbox.scopeKey.startsWith("pool:")) {
      // No session plans to a member: a take checks its shape and image, and prune removes it.
      drift.set(sandbox.name, { drifted: null, reasons: [waitingMember] });
      continue;
    }
    const planned = await planOf(sandbox, options, runners);
    const reasons: string[] = [];
    let drifted: boolean | null = false;
    if (sandbox.imageStatus === "stale") {
      reasons.push(
        `image rebuilt or changed (it runs ${sandbox.image}, no longer what the config resolves to)`,
      );
      drifted = true;
    } else if (sandbox.imageStatus === "unknown") {
      reasons.push("cannot tell whether its image is current");
      drifted = null;
    }
    let expectedConfigHash: string | undefined;
    if (planned instanceof Error) {
      // The record then says what the last acquire asked for: the best there is.
      if (sandbox.configStatus === "stale") {
        reasons.push("config changed: the last acquire asked for another config hash");
        drifted = true;
      } else {
        reasons.push(`cannot plan it with the current config: ${planned.message}`);
        if (drifted === false) drifted = null;
      }
    } else if ("unsandboxed" in planned) {
      reasons.push("the current config runs this session on the host: nothing uses this sandbox");
      drifted = true;
    } else if (planned.containerName !== sandbox.name) {
      reasons.push(
        `the current config gives this session another sandbox, ${planned.containerName}`,
      );
      drifted = true;
    } else {
      expectedConfigHash = planned.configHash;
      if (planned.configHash !== sandbox.configHash) {
        reasons.push(`config changed (hash ${sandbox.configHash} → ${planned.configHash})`);
        drifted = true;
      }
    }
    drift.set(sandbox.name, { drifted, reasons, expectedConfigHash });
  }
  return drift;
}

async function planOf(
  sandbox: SandboxSummary,
  options: DriftOptions,
  runners: Map<string, ReturnType<typeof createRunner>>,
): Promise<Planned> {
  if (!sandbox.workspace) return new Error("it was made before cordon labelled the project");
  let runner = runners.get(sandbox.workspace);
  if (!runner) {
    runner = createRunner({
      env: options.env,
      cwd: sandbox.workspace,
      workspace: sandbox.workspace,
      configPath: options.configPath,
      logger: options.logger,
    });
    runners.set(sandbox.workspace, runner);
  }
  try {
    const plan = await runner.plan({ agentId: sandbox.agent, sessionKey: sandbox.session });
    const spec = plan.sandbox.spec;
    if (!plan.sandbox.enabled || !spec) return { unsandboxed: true };
    return { containerName: spec.containerName, configHash: spec.configHash };
  } catch (error) {
    return new Error(messageOf(error));
  }
}
