import { randomBytes } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";

import {
  createRunner,
  type ModelClient,
  type Runner,
  type SandboxProvider,
} from "../src/runner/index.js";
import {
  DockerEngine,
  DockerSandbox,
  DockerSandboxManager,
  releaseWorkspaceDisksBelow,
  SandboxImage,
  SandboxInventory,
  type SandboxSpec,
} from "../src/sandbox/index.js";
import { DockerBaselines, benchLabel } from "./baselines.js";

/** Everything the figures share: one engine, one manager, a throwaway state directory. */
export interface BenchContext {
  /** Short id of this run; in every container name and label, so runs never collide. */
  readonly runId: string;
  readonly quick: boolean;
  /** The built-in sandbox image's tag; cordon and the baselines both use it. */
  readonly image: string;
  readonly engine: DockerEngine;
  /** The manager cordon uses, labelling what it creates as the bench's. */
  readonly manager: DockerSandboxManager;
  readonly inventory: SandboxInventory;
  readonly baselines: DockerBaselines;
  /** Labels on every container of this run. */
  readonly labels: Readonly<Record<string, string>>;
  /** An empty agent workspace (the bench's runs see it as theirs). */
  readonly workspace: string;
  /** An empty directory the baselines bind-mount where cordon mounts a private workspace. */
  readonly baselineWorkspace: string;
  /** Aborted on Ctrl-C: figures stop at their next step. */
  readonly signal: AbortSignal;
  /** A runner on the default configuration (seeding off), sandboxes from `manager`. */
  runner(model?: ModelClient): Runner;
  /**
   * The sandbox spec the default configuration plans for session `name` of this run; with
   * `runtime`, planned as `sandbox.docker.runtime` set to it (e.g. "runsc"); with `allowHosts`,
   * with that egress allowlist (`--allow-host`).
   */
  spec(name: string, options?: PlanVariant): Promise<SandboxSpec>;
  /** The session key of session `name` of this run. */
  sessionKey(name: string): string;
  /** A container name for a baseline container, labelled and removed like cordon's. */
  baselineName(name: string): string;
  /** One progress line on stderr. */
  progress(message: string): void;
  /** Removes every container of this run and the temporary directories; safe to call twice. */
  close(): Promise<void>;
}

/** What a figure's plan differs in from the default configuration. */
export interface PlanVariant {
  runtime?: string;
  allowHosts?: string[];
}

export interface OpenBenchContextOptions {
  quick: boolean;
  signal: AbortSignal;
  /** Where progress lines go; default stderr. */
  progress?: ((message: string) => void) | undefined;
}

export class BenchSetupError extends Error {}

/**
 * The configuration every figure runs on: cordon's defaults (mode all, one container per session,
 * a private workspace, hardened per DESIGN.md §5) with seeding off, so "a new session" measures
 * the container and not a copy of a workspace (which is empty here anyway).
 */
export function benchConfig(runtime?: string): Record<string, unknown> {
  return {
    agents: { defaults: { sandbox: { seed: false, ...(runtime ? { docker: { runtime } } : {}) } } },
  };
}

export async function openBenchContext(options: OpenBenchContextOptions): Promise<BenchContext> {
  const runId = randomBytes(4).toString("hex");
  const labels = { ...benchLabel, "cordon.bench.run": runId };
  const engine = DockerEngine.fromEnv(process.env);
  await engine.ping();
  const status = await new SandboxImage(engine).status();
  if (!status.present) {
    throw new BenchSetupError(
      `the sandbox image ${status.tag} is not built; build it with \`bash scripts/setup.sh\` (or \`npm run cordon -- image build\`)`,
    );
  }
  const image = status.tag;

  const home = await mkdtemp(path.join(tmpdir(), "cordon-bench-home-"));
  const workspace = await mkdtemp(path.join(tmpdir(), "cordon-bench-workspace-"));
  const baselineWorkspace = await mkdtemp(path.join(tmpdir(), "cordon-bench-plain-"));
  const manager = new DockerSandboxManager({
    engine,
    stateDirectory: home,
    image,
    extraLabels: labels,
    createSandbox: (container) => DockerSandbox.forContainer(engine, container),
  });
  const inventory = new SandboxInventory({ engine, stateDirectory: home, image });
  const baselines = new DockerBaselines(image, labels, options.signal);
  const sandboxes: SandboxProvider = {
    async acquire(plan, acquireOptions) {
      if (!plan.sandbox.spec) throw new Error("the bench configuration must be sandboxed");
      const lease = await manager.acquire(plan.sandbox.spec, acquireOptions);
      return {
        sandbox: lease.sandbox,
        fresh: lease.fresh,
        warnings: lease.warnings,
        release: () => lease.release(),
      };
    },
  };
  const env: NodeJS.ProcessEnv = { CORDON_HOME: home, CORDON_CONFIG: "" };
  if (process.env["DOCKER_HOST"]) env["DOCKER_HOST"] = process.env["DOCKER_HOST"];
  const runnerOn = (variant: PlanVariant, model?: ModelClient): Runner =>
    createRunner({
      cwd: workspace,
      env,
      workspace,
      configOverrides: benchConfig(variant.runtime),
      ...(variant.allowHosts ? { allowHosts: variant.allowHosts } : {}),
      sandboxes,
      ...(model ? { model } : {}),
    });
  const runner = (model?: ModelClient): Runner => runnerOn({}, model);
  const planners = new Map<string, Runner>();
  const plannerFor = (variant: PlanVariant): Runner => {
    const key = JSON.stringify([variant.runtime, variant.allowHosts]);
    let planner = planners.get(key);
    if (!planner) planners.set(key, (planner = runnerOn(variant)));
    return planner;
  };
  const sessionKey = (name: string): string => `bench-${runId}-${name}`;

  let closing: Promise<void> | undefined;
  return {
    runId,
    quick: options.quick,
    image,
    engine,
    manager,
    inventory,
    baselines,
    labels,
    workspace,
    baselineWorkspace,
    signal: options.signal,
    runner,
    sessionKey,
    async spec(name, specOptions = {}) {
      const plan = await plannerFor(specOptions).plan({ sessionKey: sessionKey(name) });
      if (!plan.sandbox.spec)
        throw new Error(`the bench plan is not sandboxed: ${plan.sandbox.reason}`);
      return plan.sandbox.spec;
    },
    baselineName: (name) => `cordon-bench-${runId}-${name}`,
    progress: options.progress ?? ((message) => process.stderr.write(`bench: ${message}\n`)),
    close() {
      closing ??= (async () => {
        await baselines.removeLabelled({ "cordon.bench.run": runId });
        if (options.signal.aborted) {
          // A `docker run` killed on Ctrl-C may still have reached the engine: sweep once more.
          await new Promise((resolve) => setTimeout(resolve, 1000));
          await baselines.removeLabelled({ "cordon.bench.run": runId });
        }
        // sandbox.disk: the private workspaces are mounted images; unmounted before rm.
        await releaseWorkspaceDisksBelow(home).catch((error: unknown) =>
          process.stderr.write(
            `bench: cannot unmount the workspaces in ${home}: ${String(error)}\n`,
          ),
        );
        for (const dir of [home, workspace, baselineWorkspace]) {
          await rm(dir, { recursive: true, force: true }).catch((error: unknown) =>
            process.stderr.write(`bench: cannot remove ${dir}: ${String(error)}\n`),
          );
        }
      })();
      return closing;
    },
  };
}
