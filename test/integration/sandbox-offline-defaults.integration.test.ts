/**
 * A sandbox with no network is still a place where a test suite runs: `localhost` resolves (a
 * suite's own local server is reachable), and package installs fail at once with the package
 * manager's offline error instead of retrying DNS for minutes. Driven through `cordon exec` with
 * the default policy (network none), as an agent's shell commands would be.
 */
import { mkdtemp, readFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";

import { afterAll, beforeAll, describe, expect, it } from "vitest";

import { createRunner } from "../../src/runner/index.js";
import { demoRepo } from "../support/demo-repo.js";
import { dockerClient, requireSandboxImage } from "../support/docker.js";
import { runCordon, type CliRun } from "../support/run-cli.js";
import { removeStateDirectory } from "../support/state-directory.js";

const sessionKey = `offline-${process.pid}-${Date.now().toString(36)}`;

describe("a sandbox with no network", () => {
  let home: string;
  let repo: string;
  const env = (): NodeJS.ProcessEnv => ({
    CORDON_HOME: home,
    CORDON_CONFIG: "",
    ANTHROPIC_API_KEY: "",
    ANTHROPIC_BASE_URL: "",
  });
  const exec = (script: string): Promise<CliRun> =>
    runCordon(
      ["exec", "--workspace", repo, "--session", sessionKey, "--", "bash", "-c", script],
      env(),
    );

  beforeAll(async () => {
    await requireSandboxImage();
    home = await mkdtemp(path.join(tmpdir(), "cordon-offline-home-"));
    repo = await demoRepo();
  });

  afterAll(async () => {
    const plan = await createRunner({ env: env(), workspace: repo })
      .plan({ sessionKey })
      .catch(() => undefined);
    const name = plan?.sandbox.spec?.containerName;
    if (name)
      await dockerClient()
        .getContainer(name)
        .remove({ force: true })
        .catch(() => undefined);
    await removeStateDirectory(home);
  });

  it("resolves localhost, so a test suite's local server is reachable", async () => {
    const run = await exec(
      [
        "getent hosts localhost",
        "python3 -m http.server 18080 --bind 127.0.0.1 --directory /workspace >/dev/null 2>&1 &",
        "for i in $(seq 50); do curl -sf -o /dev/null http://localhost:18080/ && break; sleep 0.1; done",
        "curl -sf http://localhost:18080/ | grep -c pricing",
        "kill %1",
      ].join("\n"),
    );
    expect(run.stdout).toMatch(/^(127\.0\.0\.1|::1)\s+localhost/m);
    expect(run.stdout).toMatch(/^\d+$/m);
    expect(run.exitCode).toBe(0);
  });

  it("cannot change its hosts file, which other sandboxes share", async () => {
    const run = await exec(
      "echo '10.0.0.1 evil' >> /etc/hosts; grep -c evil /etc/hosts; awk '$5 == \"/etc/hosts\" { print $6 }' /proc/self/mountinfo",
    );
    expect(run.stderr).toMatch(/\/etc\/hosts: (Permission denied|Read-only file system)/);
    // Read-only as a mount, so not even a root sandbox user could write through it.
    expect(run.stdout.trim().split("\n")).toEqual(["0", expect.stringMatching(/^ro\b/)]);
    // The file every such sandbox shares (a support volume on the engine, bound by its path
    // there: this engine is local) is unchanged.
    const plan = await createRunner({ env: env(), workspace: repo }).plan({ sessionKey });
    const container = await dockerClient()
      .getContainer(plan.sandbox.spec?.containerName ?? "")
      .inspect();
    const hosts = container.Mounts.find((mount) => mount.Destination === "/etc/hosts");
    expect(hosts?.RW).toBe(false);
    expect(await readFile(hosts?.Source ?? "", "utf8")).toMatch(/localhost/);
    expect(await readFile(hosts?.Source ?? "", "utf8")).not.toContain("evil");
  });

  it("still has no route out: loopback is its only interface", async () => {
    const run = await exec("tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '");
    expect(run.exitCode).toBe(0);
    expect(run.stdout.trim().split("\n")).toEqual(["lo"]);
  });

  it("makes npm and pip installs fail with their offline errors, not DNS retries", async () => {
    const npm = await exec("cd /tmp && npm install left-pad 2>&1");
    expect(npm.exitCode).not.toBe(0);
    expect(npm.stdout).toMatch(/ENOTCACHED/);
    expect(npm.stdout).not.toMatch(/EAI_AGAIN/);

    const pip = await exec("python -m venv .venv && .venv/bin/pip install requests 2>&1");
    expect(pip.exitCode).not.toBe(0);
    expect(pip.stdout).toMatch(/No matching distribution found for requests/);
    expect(pip.stdout).not.toMatch(/Retrying|NewConnectionError/);
  });
});
