import { execFile } from "node:child_process";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { PassThrough } from "node:stream";
import { promisify } from "node:util";

import Docker from "dockerode";

import type { DockerSettings } from "../src/sandbox/index.js";

const run = promisify(execFile);

/** Labels every bench container carries, so a crashed run's leftovers can be found. */
export const benchLabel = { "cordon.bench": "1" } as const;

/** A file on the host ready to be copied in and out with `docker cp`; `dispose()` removes it. */
export interface CpFixture {
  /** `docker cp` into `containerPath`, `docker cp` back out, and the bytes read back. */
  roundTrip(container: string, containerPath: string): Promise<void>;
  /** The first half alone: `docker cp` into `containerPath`. */
  copyIn(container: string, containerPath: string): Promise<void>;
  /** The second half alone: `docker cp` out of `containerPath`, and the bytes read back. */
  copyOut(container: string, containerPath: string): Promise<void>;
  dispose(): Promise<void>;
}

/**
 * `docker run` flags for the hardening of DESIGN.md §5, as far as the CLI spells it: what the
 * manager sets through the API (read-only root, sized tmpfs, no network, capabilities dropped,
 * no-new-privileges, init, a non-root user, memory / pids / cpu limits, a bounded log).
 */
export function hardenedRunFlags(docker: DockerSettings): string[] {
  const flags = [
    "--network",
    docker.network,
    "--cap-drop",
    docker.capDrop.join(","),
    "--security-opt",
    "no-new-privileges",
    "--init",
    "-u",
    docker.user,
    "-w",
    docker.workdir,
    "--memory",
    String(docker.memoryBytes),
    "--memory-swap",
    String(docker.memorySwapBytes),
    "--cpus",
    String(docker.cpus),
    "--pids-limit",
    String(docker.pidsLimit),
    "--log-opt",
    "max-size=1m",
    "--log-opt",
    "max-file=1",
  ];
  if (docker.readOnlyRoot) flags.push("--read-only");
  for (const [target, options] of Object.entries(docker.tmpfs)) {
    flags.push("--tmpfs", `${target}:${options}`);
  }
  return flags;
}

/** The plain-Docker ways of doing what cordon does, measured in the same run as cordon. */
export class DockerBaselines {
  private readonly docker = new Docker();

  /**
   * `signal` (Ctrl-C) kills a running `docker` command and refuses new ones, so nothing is
   * started after the bench began to clean up; removals still run.
   */
  constructor(
    private readonly image: string,
    private readonly labels: Record<string, string> = benchLabel,
    private readonly signal?: AbortSignal,
  ) {}

  private async cli(args: string[]): Promise<string> {
    this.signal?.throwIfAborted();
    const { stdout } = await run("docker", args, this.signal ? { signal: this.signal } : {});
    return stdout;
  }

  private labelFlags(): string[] {
    return Object.entries(this.labels).flatMap(([key, value]) => ["--label", `${key}=${value}`]);
  }

  /**
   * A container started the plain way, hardened like cordon's but with a writable root:
   * `docker cp` cannot write into a read-only root or a tmpfs.
   */
  async startContainer(name: string): Promise<string> {
    const stdout = await this.cli([
      "run",
      "-d",
      "--name",
      name,
      ...this.labelFlags(),
      "--network",
      "none",
      "--cap-drop",
      "ALL",
      "--security-opt",
      "no-new-privileges",
      "--init",
      "-u",
      "1000:1000",
      this.image,
      "sleep",
      "infinity",
    ]);
    return stdout.trim();
  }

  /**
   * `docker run -d` with cordon's hardening (`hardenedRunFlags`) and `workspace` bind-mounted
   * at the workdir, as a user of the plain CLI would start a sandbox.
   */
  async runHardened(name: string, docker: DockerSettings, workspace: string): Promise<string> {
    const stdout = await this.cli([
      "run",
      "-d",
      "--name",
      name,
      ...this.labelFlags(),
      ...hardenedRunFlags(docker),
      "--mount",
      `type=bind,source=${workspace},target=${docker.workdir}`,
      this.image,
      "sleep",
      "infinity",
    ]);
    return stdout.trim();
  }

  /**
   * Through the Engine API (no CLI process): creates and starts a container with cordon's
   * hardening as `hardenedRunFlags` spells it and `workspace` bind-mounted at the workdir, as a
   * program driving Docker by hand would. Remove it with `apiRemove`.
   */
  async apiStartHardened(name: string, docker: DockerSettings, workspace: string): Promise<void> {
    this.signal?.throwIfAborted();
    const container = await this.docker.createContainer({
      name,
      Image: this.image,
      Entrypoint: ["sleep"],
      Cmd: ["infinity"],
      User: docker.user,
      WorkingDir: docker.workdir,
      Labels: { ...this.labels },
      HostConfig: {
        NetworkMode: docker.network,
        CapDrop: [...docker.capDrop],
        SecurityOpt: ["no-new-privileges:true"],
        Init: true,
        ReadonlyRootfs: docker.readOnlyRoot,
        Tmpfs: { ...docker.tmpfs },
        Memory: docker.memoryBytes,
        MemorySwap: docker.memorySwapBytes,
        NanoCpus: Math.round(docker.cpus * 1e9),
        PidsLimit: docker.pidsLimit,
        LogConfig: { Type: "json-file", Config: { "max-size": "1m", "max-file": "1" } },
        Mounts: [{ Type: "bind", Source: workspace, Target: docker.workdir }],
      },
    });
    await container.start();
  }

  /** Removes a container through the Engine API (forced, with its anonymous volumes). */
  async apiRemove(name: string): Promise<void> {
    await this.docker.getContainer(name).remove({ force: true, v: true });
  }

  async removeContainer(name: string): Promise<void> {
    await run("docker", ["rm", "-f", name]).catch(() => undefined);
  }

  /** Removes every container carrying all of `labels`; how many there were. */
  async removeLabelled(labels: Record<string, string>): Promise<number> {
    const containers = await this.docker.listContainers({
      all: true,
      filters: { label: Object.entries(labels).map(([key, value]) => `${key}=${value}`) },
    });
    await Promise.all(
      containers.map((info) =>
        this.docker
          .getContainer(info.Id)
          .remove({ force: true, v: true })
          .catch(() => undefined),
      ),
    );
    return containers.length;
  }

  /** `docker exec C true` through the CLI. */
  async cliExec(container: string, command: string[] = ["true"]): Promise<void> {
    await this.cli(["exec", container, ...command]);
  }

  /** One exec through the Engine API: create, start (attached), wait for the end, inspect. */
  async apiExec(
    container: string,
    command: string[] = ["true"],
    env: string[] = [],
  ): Promise<void> {
    this.signal?.throwIfAborted();
    const exec = await this.docker.getContainer(container).exec({
      Cmd: command,
      Env: env,
      AttachStdout: true,
      AttachStderr: true,
    });
    const stream = await exec.start({ hijack: true, stdin: false });
    await new Promise<void>((resolve, reject) => {
      stream.on("end", resolve);
      stream.on("error", reject);
      stream.resume();
    });
    const info = await exec.inspect();
    if (info.ExitCode !== 0) throw new Error(`raw exec exited with ${String(info.ExitCode)}`);
  }

  /**
   * The floor of any exec channel: `cat` in one exec left open (stdin attached), a line written
   * to it and its echo awaited. `echo()` is one round trip; `close()` ends the exec.
   */
  async echoStream(container: string): Promise<{ echo(): Promise<void>; close(): void }> {
    this.signal?.throwIfAborted();
    const exec = await this.docker.getContainer(container).exec({
      Cmd: ["cat"],
      AttachStdin: true,
      AttachStdout: true,
      AttachStderr: true,
    });
    const stream = await exec.start({ hijack: true, stdin: true });
    const out = new PassThrough();
    this.docker.modem.demuxStream(stream, out, out);
    return {
      echo: () =>
        new Promise<void>((resolve, reject) => {
          const onError = (error: unknown): void => {
            out.off("data", onData);
            reject(error instanceof Error ? error : new Error(String(error)));
          };
          const onData = (): void => {
            stream.off("error", onError);
            resolve();
          };
          out.once("data", onData);
          stream.once("error", onError);
          stream.write("x\n");
        }),
      close: () => {
        stream.end();
        stream.destroy();
      },
    };
  }

  /**
   * Writes `bytes` to a host file once, so a round trip times only what a plain-Docker user
   * waits for: the two `docker cp` commands and reading the copy back.
   */
  async cpFixture(bytes: Uint8Array): Promise<CpFixture> {
    const dir = await mkdtemp(path.join(tmpdir(), "cordon-bench-"));
    const source = path.join(dir, "in.bin");
    const back = path.join(dir, "out.bin");
    await writeFile(source, bytes);
    const cli = (args: string[]): Promise<string> => this.cli(args);
    const copyIn = async (container: string, containerPath: string): Promise<void> => {
      await cli(["cp", source, `${container}:${containerPath}`]);
    };
    const copyOut = async (container: string, containerPath: string): Promise<void> => {
      await cli(["cp", `${container}:${containerPath}`, back]);
      const copied = await readFile(back);
      if (copied.length !== bytes.length) throw new Error("docker cp lost bytes");
    };
    return {
      async roundTrip(container, containerPath) {
        await copyIn(container, containerPath);
        await copyOut(container, containerPath);
      },
      copyIn,
      copyOut,
      dispose: () => rm(dir, { recursive: true, force: true }),
    };
  }

  /** `docker cp` of `bytes` into the container and back out. */
  async cpRoundTrip(
    container: string,
    bytes: Uint8Array,
    containerPath = "/home/sandbox/bench.bin",
  ): Promise<void> {
    const fixture = await this.cpFixture(bytes);
    try {
      await fixture.roundTrip(container, containerPath);
    } finally {
      await fixture.dispose();
    }
  }
}
