import { mkdir, mkdtemp, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";

import { afterAll, beforeAll, describe, expect, it } from "vitest";

import { ExitCode, SandboxStartError } from "../../src/common/index.js";
import { labelKeys } from "../../src/sandbox/docker/container-options.js";
import {
  DockerEngine,
  DockerSandboxManager,
  privateWorkspacePath,
  type DockerSandboxLease,
  type SandboxSpec,
} from "../../src/sandbox/index.js";
import {
  dockerClient,
  removeContainer,
  requireSandboxImage,
  testLabel,
} from "../support/docker.js";
import {
  makeHostileRepository,
  markersLeft,
  plantedSecrets,
} from "../support/hostile-repository.js";
import { createRecordingSandbox, recorded } from "../support/recording-sandbox.js";
import { testSandboxSpec } from "../support/sandbox-spec.js";
import { removeStateDirectory } from "../support/state-directory.js";

/**
 * The private workspace's ownership against an agent that attacks it from a real sandbox: it
 * makes /workspace unwritable (which once forced a host-side chown walk on every acquire) while a
 * background process swaps a directory for a symlink to a host directory (which made that walk
 * chown host files as root). The next acquire must refuse, and nothing on the host may change.
 */
describe("private workspace ownership", () => {
  const docker = dockerClient();
  let root: string;
  let stateDirectory: string;
  let manager: DockerSandboxManager;
  const leases: DockerSandboxLease[] = [];

  beforeAll(async () => {
    const image = await requireSandboxImage();
    root = await mkdtemp(path.join(tmpdir(), "cordon-ownership-"));
    stateDirectory = path.join(root, "home");
    manager = new DockerSandboxManager({
      engine: new DockerEngine(),
      stateDirectory,
      image,
      extraLabels: testLabel,
      createSandbox: createRecordingSandbox,
    });
  });

  afterAll(async () => {
    for (const lease of leases) await lease.release().catch(() => undefined);
    const mine = await docker.listContainers({
      all: true,
      filters: { label: [`${labelKeys.home}=${path.resolve(stateDirectory)}`] },
    });
    for (const info of mine) await removeContainer(docker.getContainer(info.Id));
    await removeStateDirectory(root);
  });

  function seededSpec(name: string, agentWorkspace: string): SandboxSpec {
    const base = testSandboxSpec(name, { spec: { agentWorkspace, seed: true } });
    const privateWorkspace = privateWorkspacePath(stateDirectory, base.containerName);
    return {
      ...base,
      privateWorkspace,
      mounts: [
        { source: privateWorkspace, target: "/workspace", readOnly: false, role: "workspace" },
      ],
    };
  }

  it("refuses a workspace the agent made unwritable, and chowns nothing while a swapper races", async () => {
    const repo = path.join(root, "repo");
    await mkdir(path.join(repo, "sub", "d"), { recursive: true });
    await writeFile(path.join(repo, "sub", "d", "f"), "f\n");
    // A host directory (root's, like every host file) the agent's symlink points at.
    const hostDir = path.join(root, "host-owned");
    await mkdir(hostDir);
    await writeFile(path.join(hostDir, "secret"), "host\n");

    const s = seededSpec("unwritable", repo);
    const lease = await manager.acquire(s);
    leases.push(lease);
    const agent = recorded(lease.sandbox);
    const swap = [
      `ln -s '${hostDir}' /workspace/sub/link`,
      // sub/d and sub/link trade places forever (renameat2 RENAME_EXCHANGE, atomic): d is a
      // directory one moment, a symlink to the host directory the next.
      `python3 -c 'import ctypes\nlibc = ctypes.CDLL(None)\nwhile True: libc.renameat2(-100, b"/workspace/sub/d", -100, b"/workspace/sub/link", 2)' </dev/null >/dev/null 2>&1 &`,
      "echo $! > /tmp/swapper.pid",
      "chmod 0555 /workspace",
    ].join("\n");
    expect((await agent.run(swap)).exitCode).toBe(0);
    await lease.release();
    // A root-owned file in the workspace: any chown walk over it would give it to uid 1000.
    const probe = path.join(s.privateWorkspace ?? "", "probe");
    await writeFile(probe, "x");

    const again = manager.acquire(s);
    await expect(again).rejects.toThrow(SandboxStartError);
    await expect(again).rejects.toMatchObject({
      exitCode: ExitCode.sandbox,
      message: expect.stringMatching(/not writable by the container user 1000:1000/) as unknown,
      fix: expect.stringContaining(`cordon sandbox rm ${s.containerName}`) as unknown,
    });

    // The swapper ran all along (the container is still up, the process alive).
    const alive = await docker.getContainer(s.containerName).exec({
      Cmd: ["sh", "-c", "kill -0 $(cat /tmp/swapper.pid) && echo alive"],
      User: s.docker.user,
      AttachStdout: true,
    });
    const stream = await alive.start({ hijack: true, stdin: false });
    const said = await new Promise<string>((resolve) => {
      const chunks: Buffer[] = [];
      stream.on("data", (chunk: Buffer) => chunks.push(chunk));
      stream.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")));
    });
    expect(said).toContain("alive");

    // Nothing was chowned: not the host directory behind the link, not the workspace.
    for (const file of [hostDir, path.join(hostDir, "secret"), probe]) {
      expect((await stat(file)).uid).toBe(process.getuid?.());
    }
    const workspace = await stat(s.privateWorkspace ?? "");
    expect([workspace.uid, workspace.mode & 0o777]).toEqual([1000, 0o555]);
  });

  it("seeds a hostile repository with no attack run on the host and no credential in the sandbox", async () => {
    const hostile = await makeHostileRepository(path.join(root, "hostile"));
    const s = seededSpec("hostile", hostile.path);
    const lease = await manager.acquire(s);
    leases.push(lease);
    const secrets = Object.values(plantedSecrets).join("\n");
    const inside = await recorded(lease.sandbox).run(
      `printf '%s\\n' '${secrets.replace(/\n/g, "' '")}' > /tmp/secrets; grep -rlFf /tmp/secrets /workspace; echo "grep exit $?"; git -C /workspace log --format=%s`,
    );
    // grep exits 1: no file in the sandbox's workspace holds any planted secret.
    expect(inside.stdout).toBe("grep exit 1\nattributes\ninit\n");
    expect(await markersLeft(hostile)).toEqual([]);
  });
});
