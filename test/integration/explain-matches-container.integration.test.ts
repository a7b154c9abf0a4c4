/**
 * `cordon sandbox explain --json` promises to be exactly what a run gets. This holds it to that
 * against a real engine: the container the runner acquires has the name, mounts, limits, user,
 * network, environment and config hash the explained plan lists — and the read-only mounts it
 * shows are read-only to an attacker inside.
 */
import { mkdir, mkdtemp, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";

import { afterAll, beforeAll, describe, expect, it } from "vitest";

import type { RunPlan } from "../../src/policy/index.js";
import { createRunner, type Runner } from "../../src/runner/index.js";

/** A sandbox the runner holds for a test, with the plan it was acquired by. */
type HeldSandbox = Awaited<ReturnType<Runner["acquireSandbox"]>>;
import { dockerClient, execIn, removeContainer, requireSandboxImage } from "../support/docker.js";
import { runCordon } from "../support/run-cli.js";
import { removeStateDirectory } from "../support/state-directory.js";

describe("sandbox explain matches the container a run gets", () => {
  let root: string;
  let home: string;
  let repo: string;
  let configPath: string;
  let plan: RunPlan;
  const held: HeldSandbox[] = [];
  const env = (): NodeJS.ProcessEnv => ({ CORDON_HOME: home, CORDON_CONFIG: "" });

  beforeAll(async () => {
    await requireSandboxImage();
    root = await mkdtemp(path.join(tmpdir(), "cordon-explain-"));
    home = path.join(root, "home");
    repo = path.join(root, "repo");
    await mkdir(path.join(repo, "data"), { recursive: true });
    await writeFile(path.join(repo, "README.md"), "hello\n");
    await writeFile(path.join(repo, "data", "facts.txt"), "42\n");
    configPath = path.join(root, "cordon.json5");
    await writeFile(
      configPath,
      JSON.stringify({
        agents: {
          defaults: { workspace: repo },
          list: [
            {
              id: "ops",
              sandbox: {
                scope: "agent",
                workspaceAccess: "ro",
                docker: {
                  // Distinct per run, so a leftover from another run is never reused.
                  containerPrefix: `cx${process.pid}`,
                  memory: "512m",
                  pidsLimit: 128,
                  env: { LANG: "C.UTF-8" },
                  binds: [`${repo}/data:/data`],
                },
              },
            },
          ],
        },
      }),
    );
    const explained = await runCordon(
      [
        "sandbox",
        "explain",
        "--config",
        configPath,
        "--agent",
        "ops",
        "--session",
        "one",
        "--json",
      ],
      env(),
    );
    expect(explained.stderr).toBe("");
    expect(explained.exitCode).toBe(0);
    plan = JSON.parse(explained.stdout) as RunPlan;
  });

  afterAll(async () => {
    for (const sandbox of held) await sandbox.lease.release();
    const name = plan?.sandbox.spec?.containerName;
    if (name) await removeContainer(dockerClient().getContainer(name));
    await removeStateDirectory(root);
  });

  it("creates the explained container with the explained settings", async () => {
    const spec = plan.sandbox.spec;
    if (!spec) throw new Error("the plan is not sandboxed");
    const runner = createRunner({ env: env(), configPath });
    held.push(await runner.acquireSandbox({ agentId: "ops", sessionKey: "one" }));

    const info = await dockerClient().getContainer(spec.containerName).inspect();
    expect(info.Name).toBe(`/${spec.containerName}`);
    expect(info.Config.Labels["cordon.config-hash"]).toBe(spec.configHash);
    expect(info.Config.Labels["cordon.scope-key"]).toMatch(/^agent:ops@[0-9a-f]{16}$/);
    expect(info.Config.Labels["cordon.scope-key"]).toBe(spec.scopeKey);
    expect(info.Config.Labels["cordon.workspace"]).toBe(plan.agent.workspace);
    // Init and the keep-alive run as a uid of their own; commands name the agent's.
    expect(info.Config.User).toBe(spec.docker.initUser);
    expect(spec.docker.initUser).not.toBe(spec.docker.user);
    expect(info.Config.WorkingDir).toBe("/workspace");
    expect(info.Config.Env).toContain("LANG=C.UTF-8");
    expect(info.Config.Env.some((entry) => entry.startsWith("CORDON_HOME="))).toBe(false);
    expect(info.HostConfig).toMatchObject({
      Memory: 512 * 1024 ** 2,
      PidsLimit: 128,
      ReadonlyRootfs: true,
      CapDrop: ["ALL"],
      NetworkMode: "none",
    });
    const binds = info.Mounts.filter((m) => m.Type === "bind").map((m) => ({
      source: m.Source,
      target: m.Destination,
      readOnly: !m.RW,
    }));
    // Cordon's own hosts file (network none; explain names it on the network line): a file in
    // a support volume on the engine, not one of this host's state directory.
    const hosts = binds.filter((m) => m.target === "/etc/hosts");
    expect(hosts).toHaveLength(1);
    expect(hosts[0]?.source).toMatch(
      /^\/var\/lib\/docker\/volumes\/cordon-hosts-[0-9a-f]{16}-[0-9a-f]{8}\/_data\/hosts$/,
    );
    expect(hosts[0]?.readOnly).toBe(true);
    const mounts = binds
      .filter((m) => m.target !== "/etc/hosts")
      .sort((a, b) => a.target.localeCompare(b.target));
    // The binds are the planned mounts, nothing else.
    expect(mounts).toEqual(
      spec.mounts
        .map(({ source, target, readOnly }) => ({ source, target, readOnly }))
        .sort((a, b) => a.target.localeCompare(b.target)),
    );
    // The resident executor, cordon's own binary: its volume on the engine, read-only.
    const volumes = info.Mounts.filter((m) => m.Type === "volume").map((m) => ({
      name: m.Name ?? "",
      target: m.Destination,
      readOnly: !m.RW,
    }));
    // And the hosts file's volume itself, so the engine counts it as used (hosts-file.ts).
    volumes.sort((a, b) => a.target.localeCompare(b.target));
    expect(volumes).toHaveLength(2);
    expect(volumes[0]?.name).toMatch(/^cordon-executor-[0-9a-f]{16}-[0-9a-f]{8}$/);
    expect(volumes[0]).toMatchObject({ target: "/.cordon", readOnly: true });
    expect(volumes[1]).toMatchObject({ target: "/.cordon-hosts", readOnly: true });
    expect(hosts[0]?.source).toContain(`/${volumes[1]?.name}/_data/`);
  });

  it("keeps what it shows as read-only read-only, from inside", async () => {
    const container = dockerClient().getContainer(plan.sandbox.spec?.containerName ?? "");
    const user = plan.sandbox.spec?.docker.user ?? "";
    const run = (command: string[]) => execIn(container, command, { user });
    expect((await run(["cat", "/data/facts.txt"])).stdout).toBe("42\n");
    const writeBind = await run(["sh", "-c", "echo x > /data/facts.txt"]);
    expect(writeBind.exitCode).not.toBe(0);
    expect(writeBind.stderr).toMatch(/Read-only file system/);
    const writeAgent = await run(["sh", "-c", "echo x > /agent/README.md"]);
    expect(writeAgent.exitCode).not.toBe(0);
    expect(
      (await run(["sh", "-c", "echo ok > /workspace/scratch && cat /workspace/scratch"])).stdout,
    ).toBe("ok\n");
  });

  it("gives another session of the agent-scoped agent the same container", async () => {
    const runner = createRunner({ env: env(), configPath });
    const two = await runner.acquireSandbox({ agentId: "ops", sessionKey: "two" });
    held.push(two);
    expect(two.plan.sandbox.spec?.containerName).toBe(plan.sandbox.spec?.containerName);
    expect(two.plan.sandbox.spec?.configHash).toBe(plan.sandbox.spec?.configHash);
    const containers = await dockerClient().listContainers({
      all: true,
      filters: { name: [plan.sandbox.spec?.containerName ?? ""] },
    });
    expect(containers).toHaveLength(1);
  });
});
