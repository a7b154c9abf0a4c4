import { mkdir, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";

import type { Command } from "commander";

import { CordonError, ExitCode, messageOf, stateDirectory } from "../../common/index.js";
import { UntrustedConfigError, type ConfigSource } from "../../config/index.js";
import {
  diskBudgetSupport,
  DockerEngine,
  releaseWorkspaceDisk,
  SandboxImage,
  SandboxInventory,
  strayHomes,
  workspaceDiskFor,
  baseImageFromEnv,
  gvisorBoundaryNote,
  gvisorPlatform,
  isGvisorRuntime,
  probeRuntime,
  describeEngineEndpoint,
  type DockerEngineInfo,
  type EngineEndpoint,
} from "../../sandbox/index.js";
import type { CliContext } from "../context.js";
import { plain, type Paint, type TextStyle } from "../render/colors.js";
import { tableWidth, wrapText } from "../render/table.js";
import { loadCliConfig } from "../plan-context.js";
import { describeSource } from "./config.js";
import { residentExecutorBinary } from "../../sandbox/docker/resident/executor-binary.js";

/** "warn": works, with less protection than configured (the report stays ok). */
export type CheckStatus = "ok" | "warn" | "fail" | "skipped";

export interface DoctorCheck {
  name: string;
  status: CheckStatus;
  detail: string;
  fix?: string;
}

export interface DoctorReport {
  ok: boolean;
  checks: DoctorCheck[];
  /** The config file of the working directory and whether it is trusted; null = none. */
  config?: ConfigSource | null;
}

const minimumNode = { major: 20, minor: 19 };

function checkNode(version: string): DoctorCheck {
  const [major = 0, minor = 0] = version.split(".").map(Number);
  const ok =
    major > minimumNode.major || (major === minimumNode.major && minor >= minimumNode.minor);
  return ok
    ? { name: "node", status: "ok", detail: `Node.js ${version}` }
    : {
        name: "node",
        status: "fail",
        detail: `Node.js ${version} is older than ${minimumNode.major}.${minimumNode.minor}`,
        fix: "install Node.js 20.19 or newer",
      };
}

function failed(name: string, error: unknown): DoctorCheck {
  const check: DoctorCheck = { name, status: "fail", detail: messageOf(error) };
  if (CordonError.is(error) && error.fix) check.fix = error.fix;
  return check;
}

async function checkStateDirectory(dir: string): Promise<DoctorCheck> {
  const probe = path.join(dir, `.doctor-${process.pid}`);
  try {
    await mkdir(dir, { recursive: true, mode: 0o700 });
    await writeFile(probe, "ok");
    await rm(probe);
    return { name: "state", status: "ok", detail: `${dir} is writable` };
  } catch (error) {
    return {
      name: "state",
      status: "fail",
      detail: `${dir} is not writable: ${messageOf(error)}`,
      fix: "set CORDON_HOME to a writable directory",
    };
  }
}

/**
 * Whether `sandbox.disk` can be enforced: the cheap probe acquires use, then a real image made,
 * mounted and removed in the state directory (mount(2) can be refused where the probe passes).
 * On an engine elsewhere no copy is made here: copies are volumes there, which are watched.
 */
export async function checkDiskBudget(
  dir: string,
  endpoint: EngineEndpoint | undefined,
): Promise<DoctorCheck> {
  if (endpoint && !endpoint.sharesFilesystem) {
    return {
      name: "disk",
      status: "warn",
      detail:
        "private copies live in volumes on the engine, which no volume driver bounds on disk: sandbox.disk is watched there (du in a throwaway container every 10 s while a sandbox is held; past it the sandbox is stopped), not enforced by the kernel",
      fix: 'accept it, or set sandbox.disk to "unlimited"; a bounded copy needs a local engine and cordon as root',
    };
  }
  const support = await diskBudgetSupport();
  if (!support.enforced) {
    return {
      name: "disk",
      status: "warn",
      detail: `sandbox.disk is not enforced: ${support.reason}; private workspaces are plain directories, measured while in use, and a sandbox past the budget is stopped`,
      fix: support.fix,
    };
  }
  const trial = path.join(dir, `.doctor-disk-${process.pid}`);
  const workspace = path.join(trial, "workspace");
  try {
    await mkdir(trial, { recursive: true, mode: 0o700 });
    const started = performance.now();
    await (await workspaceDiskFor(16 * 1024 ** 2, []))?.install(workspace);
    await writeFile(path.join(workspace, "probe"), "ok");
    const elapsed = Math.round(performance.now() - started);
    return {
      name: "disk",
      status: "ok",
      detail: `private workspaces are bounded by sandbox.disk (ext4 image made and loop-mounted in ${elapsed} ms)`,
    };
  } catch (error) {
    return {
      name: "disk",
      status: "fail",
      detail: `cannot make a bounded private workspace: ${messageOf(error)}`,
      fix: 'set sandbox.disk to "unlimited" (private workspaces become plain directories, unbounded)',
    };
  } finally {
    await releaseWorkspaceDisk(workspace).catch(() => undefined);
    await rm(trial, { recursive: true, force: true }).catch(() => undefined);
  }
}

/** The resident executor binary (`sandbox.docker.executor: "resident"`); without it, plain exec. */
function checkExecutor(): DoctorCheck {
  const binary = residentExecutorBinary();
  return binary
    ? { name: "executor", status: "ok", detail: `resident executor built (${binary})` }
    : {
        name: "executor",
        status: "warn",
        detail:
          "the resident executor is not built: every sandbox call opens a Docker exec (slower)",
        fix: "install gcc and libc6-dev, then run `npm run build` (or scripts/setup.sh)",
      };
}

/**
 * The container runtime asked for (`sandbox.docker.runtime`, or CORDON_RUNTIME as setup reads
 * it): registered with the engine, and a container really starts under it.
 */
async function checkRuntime(
  engine: DockerEngine,
  info: DockerEngineInfo,
  runtime: string | undefined,
  image: string | undefined,
): Promise<DoctorCheck> {
  const registered = `registered: ${info.runtimes.join(", ") || "(none listed)"}`;
  if (!runtime) {
    return {
      name: "runtime",
      status: "ok",
      detail: `the engine's default (${info.defaultRuntime || "runc"}); ${registered}`,
    };
  }
  if (!info.runtimes.includes(runtime)) {
    return {
      name: "runtime",
      status: "fail",
      detail: `${runtime} is not registered with the engine (${registered})`,
      fix: isGvisorRuntime(runtime)
        ? "install gVisor and register it with the engine (`cordon help gvisor`; from a clone, `CORDON_RUNTIME=runsc bash scripts/setup.sh` does both)"
        : `register ${runtime} with the engine (daemon.json "runtimes"), or unset sandbox.docker.runtime`,
    };
  }
  if (!image) {
    return { name: "runtime", status: "skipped", detail: `${runtime}: needs the sandbox image` };
  }
  try {
    await probeRuntime(engine, runtime, image);
  } catch (error) {
    return failed("runtime", error);
  }
  const note = isGvisorRuntime(runtime)
    ? ` (platform: ${gvisorPlatform(info.runtimeArgs[runtime] ?? [])}); ${gvisorBoundaryNote}`
    : "";
  return { name: "runtime", status: "ok", detail: `${runtime} runs containers${note}` };
}

/** Runs every check; never throws. `runtime`: the one the config asks for, if any. */
/**
 * Private workspaces whose container is gone: a mounted one holds a loop device until it is
 * released (and makes `rm -rf` of the state directory fail with "Device or resource busy").
 */
async function checkOrphans(engine: DockerEngine, dir: string): Promise<DoctorCheck> {
  try {
    const orphans = await new SandboxInventory({ engine, stateDirectory: dir }).orphans();
    if (orphans.length === 0) {
      return { name: "orphans", status: "ok", detail: "no workspace outlives its sandbox" };
    }
    const mounted = orphans.filter((orphan) => orphan.mounted).length;
    return {
      name: "orphans",
      status: "warn",
      detail: `${orphans.length} private workspace(s) whose container is gone${mounted ? `, ${mounted} still mounted (each holds a loop device)` : ""}: ${orphans
        .slice(0, 3)
        .map((orphan) => orphan.path)
        .join(", ")}`,
      fix: "run `cordon sandbox prune`: it releases them, keeping the disk images of work never applied (`--discard-changes` removes those too)",
    };
  } catch (error) {
    return failed("orphans", error);
  }
}

/**
 * Support volumes (the executor binary, hosts files) no container mounts: harmless and small (each
 * is reused by the next sandbox with the same content), but an executor rebuilt often leaves one a
 * build; prune removes them.
 */
async function checkSupportVolumes(engine: DockerEngine, dir: string): Promise<DoctorCheck> {
  try {
    const unused = await new SandboxInventory({
      engine,
      stateDirectory: dir,
    }).unusedSupportVolumes();
    if (unused.length === 0) {
      return {
        name: "support",
        status: "ok",
        detail: "every support volume on the engine is in use",
      };
    }
    return {
      name: "support",
      status: "ok",
      detail: `${unused.length} support volume(s) on the engine no container mounts (${[
        ...new Set(unused.map((volume) => volume.holds)),
      ].join("; ")}): \`cordon sandbox prune\` removes them, and they are made again when needed`,
    };
  } catch (error) {
    return failed("support", error);
  }
}

/**
 * Containers of state directories that are gone (a temporary CORDON_HOME deleted under them):
 * no cordon command sees them again, since each works on its own state directory.
 */
async function checkStrays(engine: DockerEngine): Promise<DoctorCheck> {
  try {
    const strays = await strayHomes(engine.containers);
    if (strays.length === 0) {
      return { name: "strays", status: "ok", detail: "no container outlives its state directory" };
    }
    const count = strays.reduce((sum, stray) => sum + stray.containers.length, 0);
    const [first] = strays;
    return {
      name: "strays",
      status: "warn",
      detail: `${count} container(s) of ${strays.length} state director${strays.length === 1 ? "y" : "ies"} that no longer exist: ${strays
        .slice(0, 3)
        .map((stray) => `${stray.home} (${stray.containers.length})`)
        .join(", ")}${strays.length > 3 ? `, and ${strays.length - 3} more` : ""}`,
      fix: `no cordon command sees them any more; remove each directory's with \`docker rm -f $(docker ps -aq --filter label=cordon.home=${first?.home ?? "DIR"})\``,
    };
  } catch (error) {
    return failed("strays", error);
  }
}

/**
 * Which engine cordon talks to, from where, and whether it sees this host's files. An engine
 * elsewhere runs sandboxes with their private copy in volumes there; only `workspaceAccess`
 * "ro"/"rw", which bind a host path, cannot run on it. A local socket whose engine reports another
 * host name (Docker Desktop's VM, a socket mounted into a container) may not see this host's paths
 * either.
 */
export function checkEngine(endpoint: EngineEndpoint, engineName: string): DoctorCheck {
  const where = describeEngineEndpoint(endpoint);
  if (!endpoint.sharesFilesystem) {
    return {
      name: "engine",
      status: "ok",
      detail: `${where}: elsewhere (engine host ${engineName || "unnamed"}), not sharing this host's filesystem — private copies live in volumes there; workspaceAccess "ro"/"rw" cannot be used on it`,
    };
  }
  const here = os.hostname();
  if (engineName && engineName !== here) {
    return {
      name: "engine",
      status: "warn",
      detail: `${where}: a local socket, but the engine reports host name ${engineName} (this host is ${here}); if it runs in a VM or serves another host, the paths sandboxes bind are not there`,
      fix: "run cordon on the engine's host, or against an engine there (`docker context use default`)",
    };
  }
  return { name: "engine", status: "ok", detail: `${where}; shares this host's filesystem` };
}

export async function runDoctor(env: NodeJS.ProcessEnv, runtime?: string): Promise<DoctorReport> {
  const checks: DoctorCheck[] = [checkNode(process.versions.node)];
  const engine = DockerEngine.fromEnv(env);
  let dockerOk = false;
  let engineInfo: DockerEngineInfo | undefined;
  let endpoint: EngineEndpoint | undefined;
  try {
    endpoint = engine.endpoint();
  } catch (error) {
    checks.push(failed("engine", error));
  }
  try {
    if (!endpoint) throw new Error("needs an engine cordon can resolve");
    const info = await engine.ping();
    engineInfo = info;
    dockerOk = true;
    checks.push({
      name: "docker",
      status: "ok",
      detail: `engine ${info.serverVersion}, API ${info.apiVersion}, ${info.storageDriver}, cgroups v${info.cgroupVersion || "?"}`,
    });
    checks.push(checkEngine(endpoint, info.name));
  } catch (error) {
    checks.push(
      endpoint
        ? failed("docker", error)
        : { name: "docker", status: "skipped", detail: messageOf(error) },
    );
  }
  if (dockerOk) {
    let presentImage: string | undefined;
    try {
      const image = await new SandboxImage(engine, {
        baseImage: baseImageFromEnv(env),
      }).status();
      if (image.present) presentImage = image.tag;
      checks.push(
        image.present
          ? {
              name: "image",
              status: "ok",
              detail: `${image.tag} is current (base ${image.baseImage})`,
            }
          : {
              name: "image",
              status: "fail",
              detail: `${image.tag} is not built${image.staleTags.length ? ` (stale: ${image.staleTags.join(", ")})` : ""}`,
              fix: "run `cordon image build`",
            },
      );
    } catch (error) {
      checks.push(failed("image", error));
    }
    if (engineInfo) checks.push(await checkRuntime(engine, engineInfo, runtime, presentImage));
    checks.push(await checkOrphans(engine, stateDirectory(env)));
    if (endpoint?.sharesFilesystem) checks.push(await checkStrays(engine));
    checks.push(await checkSupportVolumes(engine, stateDirectory(env)));
  } else {
    checks.push({ name: "image", status: "skipped", detail: "needs a Docker engine" });
    checks.push({ name: "runtime", status: "skipped", detail: "needs a Docker engine" });
  }
  checks.push(checkExecutor());
  const state = await checkStateDirectory(stateDirectory(env));
  checks.push(state);
  checks.push(
    state.status === "ok"
      ? await checkDiskBudget(stateDirectory(env), endpoint)
      : { name: "disk", status: "skipped", detail: "needs a writable state directory" },
  );
  return { ok: checks.every((c) => c.status === "ok" || c.status === "warn"), checks };
}

/** The working directory's config: loads, and is trusted or loosens nothing (`cordon run` would start). */
async function checkConfig(
  context: CliContext,
): Promise<{ source: ConfigSource | null; check?: DoctorCheck; runtime?: string | undefined }> {
  // CORDON_RUNTIME is a config layer; read directly too, for when the config does not load.
  const fromEnv = context.env["CORDON_RUNTIME"] || undefined;
  try {
    const loaded = await loadCliConfig(context);
    const runtime = loaded.config.agents.defaults.sandbox.docker.runtime ?? fromEnv;
    if (!loaded.source) return { source: null, runtime };
    const { source } = loaded;
    return {
      runtime,
      source,
      check: { name: "config", status: "ok", detail: `${source.file} ${describeSource(source)}` },
    };
  } catch (error) {
    const source = error instanceof UntrustedConfigError ? error.source : null;
    return { source, check: failed("config", error), runtime: fromEnv };
  }
}

function withConfigCheck(
  report: DoctorReport,
  config: Awaited<ReturnType<typeof checkConfig>>,
): DoctorReport {
  if (!config.check) return { ...report, config: config.source };
  const checks = [...report.checks, config.check];
  return {
    ok: checks.every((c) => c.status === "ok" || c.status === "warn"),
    checks,
    config: config.source,
  };
}

const marks: Record<CheckStatus, { text: string; style: TextStyle }> = {
  ok: { text: "ok  ", style: "green" },
  warn: { text: "WARN", style: ["yellow", "bold"] },
  fail: { text: "FAIL", style: ["red", "bold"] },
  skipped: { text: "skip", style: "dim" },
};

/**
 * The report: a verdict, the check's name and what it found, one check a line (names in one
 * column however long the longest); on a terminal (`width`) a long finding or fix wraps under its
 * own column instead of under the verdicts.
 */
export function formatDoctorReport(
  report: DoctorReport,
  paint: Paint = plain,
  width?: number,
): string {
  const nameWidth = Math.max(0, ...report.checks.map((check) => check.name.length));
  // "WARN  " + the name column + two spaces, as the tables' columns are apart.
  const indent = 4 + 2 + nameWidth + 2;
  const lines = report.checks.map((check) => {
    const mark = marks[check.status];
    let line = `${paint(mark.style, mark.text)}  ${check.name.padEnd(nameWidth)}  ${wrapText(check.detail, width, indent)}`;
    if (check.fix) line += `\n${" ".repeat(indent)}${wrapText(`fix: ${check.fix}`, width, indent)}`;
    return line;
  });
  const warned = report.checks.some((check) => check.status === "warn");
  lines.push(
    report.ok ? `\nall checks passed${warned ? ", with warnings" : ""}` : "\nsome checks failed",
  );
  return `${lines.join("\n")}\n`;
}

export function registerDoctorCommand(program: Command, context: CliContext): void {
  program
    .command("doctor")
    .description(
      "check Node.js, the Docker engine, the sandbox image, the container runtime, the state directory and the disk budget",
    )
    .option("--json", "print the report as JSON")
    .action(async (options: { json?: boolean }) => {
      const config = await checkConfig(context);
      const report = withConfigCheck(await runDoctor(context.env, config.runtime), config);
      context.stdout(
        options.json
          ? `${JSON.stringify(report, null, 2)}\n`
          : formatDoctorReport(report, context.paint.stdout, tableWidth(context.terminal, false)),
      );
      context.exitCode = report.ok ? ExitCode.success : ExitCode.sandbox;
    });
}
