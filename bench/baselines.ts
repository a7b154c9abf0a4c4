import { execFile } from "node:child_process";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";

import Docker from "dockerode";

const run = promisify(execFile);

/** The plain-Docker ways of doing what cordon does, measured in the same run as cordon. */
export class DockerBaselines {
  private readonly docker = new Docker();

  constructor(private readonly image: string) {}

  /**
   * A container started the plain way, hardened like cordon's but with a writable root:
   * `docker cp` cannot write into a read-only root or a tmpfs.
   */
  async startContainer(name: string): Promise<string> {
    const { stdout } = await run("docker", [
      "run",
      "-d",
      "--name",
      name,
      "--label",
      "cordon.bench=1",
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

  async removeContainer(name: string): Promise<void> {
    await run("docker", ["rm", "-f", name]).catch(() => undefined);
  }

  /** `docker exec C true` through the CLI. */
  async cliExec(container: string, command: string[] = ["true"]): Promise<void> {
    await run("docker", ["exec", container, ...command]);
  }

  /** One exec through the Engine API: create, start (attached), wait for the end, inspect. */
  async apiExec(container: string): Promise<void> {
    const exec = await this.docker.getContainer(container).exec({
      Cmd: ["true"],
      AttachStdout: true,
      AttachStderr: true,
    });
    const stream = await exec.start({ hijack: true, stdin: false });
    await new Promise<void>((resolve, reject) => {
      stream.on("end", resolve);
      stream.on("error", reject);
      stream.resume();
    });
    await exec.inspect();
  }

  /** `docker cp` of `bytes` into the container and back out. */
  async cpRoundTrip(container: string, bytes: Buffer): Promise<void> {
    const dir = await mkdtemp(path.join(tmpdir(), "cordon-bench-"));
    try {
      const source = path.join(dir, "in.bin");
      await writeFile(source, bytes);
      await run("docker", ["cp", source, `${container}:/home/sandbox/bench.bin`]);
      await run("docker", [
        "cp",
        `${container}:/home/sandbox/bench.bin`,
        path.join(dir, "out.bin"),
      ]);
      const back = await readFile(path.join(dir, "out.bin"));
      if (back.length !== bytes.length) throw new Error("docker cp lost bytes");
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  }
}
