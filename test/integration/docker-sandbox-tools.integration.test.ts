import { chown, mkdtemp, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";

import type Docker from "dockerode";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

import { DockerEngine, DockerSandbox } from "../../src/sandbox/index.js";
import { createContainerOptions } from "../../src/sandbox/docker/container-options.js";
import { toolHarness } from "../../src/tools/testing/index.js";
import {
  dockerClient,
  removeContainer,
  requireSandboxImage,
  testLabel,
  testExecutorVolume,
} from "../support/docker.js";
import { testRuntime, testSandboxSpec } from "../support/sandbox-spec.js";

/** CORDON_TEST_RUNTIME=runsc: the same tools under gVisor (docs/gvisor.md). */
const gvisor = testRuntime !== undefined && /^runsc/.test(testRuntime);

/**
 * The nine built-in tools over a real DockerSandbox (workspaceAccess ro: the agent workspace
 * read-only at /agent, a private /workspace): the contract the tools were written against holds
 * on the real backend, and the container is the agent's only filesystem.
 */
describe("the built-in tools on a DockerSandbox", () => {
  const docker = dockerClient();
  let container: Docker.Container | undefined;
  let base: string;
  let tools: ReturnType<typeof toolHarness>;

  beforeAll(async () => {
    const image = await requireSandboxImage();
    base = await mkdtemp(path.join(tmpdir(), "cordon-tools-"));
    const workspace = path.join(base, "workspace");
    const agent = path.join(base, "agent");
    const hostOnly = path.join(base, "host-only");
    for (const dir of [workspace, agent, hostOnly]) {
      await import("node:fs/promises").then((fs) => fs.mkdir(dir));
    }
    await chown(workspace, 1000, 1000);
    await writeFile(path.join(agent, "README.md"), "# agent repo\nread only here\n");
    await writeFile(path.join(hostOnly, "secret.txt"), "host secret\n");
    // A link the agent's workspace carries, pointing at a host path: in the container it leads
    // to the container's own filesystem, where that path does not exist.
    await symlink(path.join(hostOnly, "secret.txt"), path.join(agent, "host-link"));
    const spec = testSandboxSpec("tools", {
      spec: {
        workspaceAccess: "ro",
        mounts: [
          { source: workspace, target: "/workspace", readOnly: false, role: "workspace" },
          { source: agent, target: "/agent", readOnly: true, role: "agent-workspace" },
        ],
      },
    });
    container = await docker.createContainer(
      createContainerOptions({
        spec,
        image,
        createdAt: new Date().toISOString(),
        extraLabels: testLabel,
        executorVolume: await testExecutorVolume(image),
      }),
    );
    await container.start();
    tools = toolHarness(
      new DockerSandbox({
        engine: new DockerEngine(),
        containerId: container.id,
        containerName: spec.containerName,
        workdir: "/workspace",
        user: "1000:1000",
        executor: spec.docker.executor,
      }),
    );
  });

  afterAll(async () => {
    await removeContainer(container);
    await rm(base, { recursive: true, force: true });
  });

  const run = async (name: string, input: unknown): Promise<{ text: string; isError: boolean }> => {
    const result = await tools.call(name, input);
    return { text: tools.text(result), isError: result.isError };
  };

  it("write, read, edit and apply_patch a file in the workspace", async () => {
    expect((await run("write", { path: "src/app.py", content: "print('one')\n" })).isError).toBe(
      false,
    );
    const read = await run("read", { path: "src/app.py" });
    expect(read.text).toContain("print('one')");
    const edit = await run("edit", { path: "src/app.py", old_text: "one", new_text: "two" });
    expect(edit.isError).toBe(false);
    const patch = [
      "--- a/src/app.py",
      "+++ b/src/app.py",
      "@@ -1 +1,2 @@",
      " print('two')",
      "+print('three')",
      "",
    ].join("\n");
    const applied = await run("apply_patch", { patch });
    expect(applied.isError, applied.text).toBe(false);
    const exec = await run("exec", { command: "python3 src/app.py" });
    expect(exec.text).toContain("two\nthree");
  });

  it("ls, find and grep see the container's files", async () => {
    expect((await run("ls", { path: "src" })).text).toContain("app.py");
    expect((await run("find", { pattern: "**/*.py" })).text).toContain("src/app.py");
    const grep = await run("grep", { pattern: "three", path: "." });
    expect(grep.text).toMatch(/app\.py.*three/);
    expect((await run("read", { path: "/agent/README.md" })).text).toContain("read only here");
  });

  it("write, edit and exec are refused on the read-only agent mount, and say so", async () => {
    const write = await run("write", { path: "/agent/README.md", content: "changed" });
    expect(write.isError).toBe(true);
    expect(write.text).toMatch(/read-only mount/);
    const edit = await run("edit", {
      path: "/agent/README.md",
      old_text: "read",
      new_text: "write",
    });
    expect(edit.isError).toBe(true);
    expect(edit.text).toMatch(/read-only/);
    const exec = await run("exec", { command: "echo x > /agent/new.txt" });
    expect(exec.isError).toBe(true);
    // The agent's own command sees the kernel's error: EACCES under gVisor, EROFS under runc.
    expect(exec.text).toMatch(gvisor ? /Permission denied/ : /Read-only file system/);
  });

  it("a symlink to a host path reaches nothing of the host", async () => {
    const read = await run("read", { path: "/agent/host-link" });
    expect(read.isError).toBe(true);
    expect(read.text).not.toContain("host secret");
    const exec = await run("exec", { command: "cat /agent/host-link; ls /agent" });
    expect(exec.text).not.toContain("host secret");
    expect(exec.text).toMatch(/No such file or directory/);
  });

  it("exec names the full log of a long output, and read can page through it", async () => {
    const exec = await run("exec", { command: "seq 1 300000" });
    const logPath = /Full output: (\S+)/.exec(exec.text)?.[1];
    expect(logPath).toMatch(/^\/tmp\/\.cordon\/logs\//);
    const page = await run("read", { path: logPath, offset: 150000, limit: 2 });
    expect(page.text).toContain("150000");
    expect(page.text).toContain("150001");
  });

  // Under gVisor (runsc 2022-12) a background process wedged the sandbox: docs/gvisor.md.
  it.skipIf(gvisor)("the process tool drives a background process", async () => {
    const started = await run("exec", {
      command: 'while read -r line; do echo "echo:$line"; done',
      background: true,
    });
    const id = /process (p-[0-9a-f]+)/.exec(started.text)?.[1];
    expect(id).toBeDefined();
    await run("process", { action: "write", id, data: "hi\n" });
    let log = "";
    for (let i = 0; i < 100 && !log.includes("echo:hi"); i++) {
      log = (await run("process", { action: "log", id })).text;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    expect(log).toContain("echo:hi");
    expect((await run("process", { action: "kill", id })).text).toMatch(/Killed/);
    const unknown = await run("process", { action: "poll", id: "p-000000000000" });
    expect(unknown.isError).toBe(true);
    expect(unknown.text).toMatch(/No background process with id "p-000000000000". Known ids: /);
  });
});
