/**
 * Network by allowlist, against the real engine and the real npm registry: a sandbox with
 * `--allow-host registry.npmjs.org` reaches the registry through its own squid proxy and nothing
 * else. The attacks are run from inside the sandbox, as an agent would: another host, the same
 * proxy with a forged Host header, another port, the registry's address instead of its name, a
 * direct connection that skips the proxy, a DNS lookup. Every request the proxy sees comes back
 * as an `egress` decision. The sandbox has no network: the proxy is a port cordon forwards to its
 * loopback (no-route-to-host.integration.test.ts probes the host). Removing the sandbox removes
 * its proxy; prune removes a proxy whose sandbox was removed by hand.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";

import { afterAll, beforeAll, describe, expect, it } from "vitest";

import { createRunner, type Runner } from "../../src/runner/index.js";

/** A sandbox the runner holds for a test, with the plan it was acquired by. */
type HeldSandbox = Awaited<ReturnType<Runner["acquireSandbox"]>>;
import { DockerEngine, SandboxInventory, type EgressDecision } from "../../src/sandbox/index.js";
import { demoRepo, trustHostCertificatesConfig } from "../support/demo-repo.js";
import { dockerClient, requireSandboxImage } from "../support/docker.js";
import { runCordon } from "../support/run-cli.js";
import { removeStateDirectory } from "../support/state-directory.js";

const suffix = `${process.pid}-${Date.now().toString(36)}`;

describe("egress by allowlist", () => {
  let home: string;
  let repo: string;
  let trustConfig: string;
  const env = (): NodeJS.ProcessEnv => ({ CORDON_HOME: home, CORDON_CONFIG: "" });

  beforeAll(async () => {
    await requireSandboxImage();
    home = await mkdtemp(path.join(tmpdir(), "cordon-egress-home-"));
    repo = await demoRepo();
    // This machine's egress inspects TLS: the sandbox trusts the host's CA bundle, as a user
    // behind a corporate proxy would set it in their own (trusted) config.
    trustConfig = await trustHostCertificatesConfig(home);
  });

  afterAll(async () => {
    await runCordon(["sandbox", "rm", "--all", "--discard-changes"], env()).catch(() => undefined);
    await removeStateDirectory(home);
    await rm(path.dirname(repo), { recursive: true, force: true });
  });

  async function withSandbox<T>(
    sessionKey: string,
    options: { allowHosts?: string[]; trust?: boolean },
    fn: (held: HeldSandbox, decisions: EgressDecision[]) => Promise<T>,
  ): Promise<T> {
    const runner = createRunner({
      env: env(),
      workspace: repo,
      configPath: options.trust ? trustConfig : undefined,
      allowHosts: options.allowHosts,
    });
    const decisions: EgressDecision[] = [];
    const held = await runner.acquireSandbox({
      sessionKey,
      onEgress: (decision) => decisions.push(decision),
    });
    try {
      return await fn(held, decisions);
    } finally {
      await held.lease.release();
    }
  }

  /** Waits for the proxy's log line to arrive through the log stream. */
  async function decisionFor(decisions: EgressDecision[], host: string): Promise<EgressDecision> {
    for (let attempt = 0; attempt < 50; attempt += 1) {
      const found = decisions.find((decision) => decision.host === host);
      if (found) return found;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    throw new Error(`no egress decision for ${host}; got ${JSON.stringify(decisions)}`);
  }

  it("the allowed registry answers through the proxy; every other way out fails, and refusals are events", async () => {
    const session = `allow-${suffix}`;
    await withSandbox(
      session,
      { allowHosts: ["registry.npmjs.org"], trust: true },
      async ({ lease }, decisions) => {
        const exec = (command: string) => lease.sandbox.exec(command, { timeoutMs: 60_000 });

        const registry = await exec(
          "curl -sS -m 30 -o /dev/null -w '%{http_code}' https://registry.npmjs.org/mocha",
        );
        expect(registry.stdout).toBe("200");
        expect(await decisionFor(decisions, "registry.npmjs.org")).toMatchObject({
          port: 443,
          allowed: true,
        });

        const other = await exec("curl -sS -m 30 https://example.com/ 2>&1");
        expect(other.exitCode).not.toBe(0);
        expect(other.stdout).toMatch(/403/);
        expect(await decisionFor(decisions, "example.com")).toMatchObject({
          port: 443,
          allowed: false,
        });

        // Plain HTTP to an allowed proxy with a forged Host header: squid decides by the URL.
        const forged = await exec(
          "curl -sS -m 30 -o /dev/null -w '%{http_code}' -H 'Host: registry.npmjs.org' http://deb.debian.org/debian/",
        );
        expect(forged.stdout).toBe("403");
        expect(await decisionFor(decisions, "deb.debian.org")).toMatchObject({ allowed: false });

        // The registry's own address: the proxy matches names only, never by reverse DNS.
        const byAddress = await exec(
          "curl -sS -m 30 -o /dev/null -w '%{http_code}' --resolve registry.npmjs.org:443:104.16.0.35 -k https://104.16.0.35/ 2>&1",
        );
        expect(byAddress.exitCode).not.toBe(0);
        expect(await decisionFor(decisions, "104.16.0.35")).toMatchObject({ allowed: false });

        // An allowed name on another port.
        const otherPort = await exec(
          "curl -sS -m 30 -o /dev/null https://registry.npmjs.org:8443/ 2>&1",
        );
        expect(otherPort.exitCode).not.toBe(0);
        expect(decisions.filter((d) => d.port === 8443).every((d) => !d.allowed)).toBe(true);

        // No other route: a direct connection to an address, skipping the proxy, and DNS.
        const direct = await exec(
          "curl --noproxy '*' -sS -m 5 https://104.16.0.35/ 2>&1; timeout 5 bash -c 'exec 3<>/dev/tcp/1.1.1.1/53' 2>&1",
        );
        expect(direct.stdout).not.toMatch(/HTTP/);
        expect(direct.exitCode).not.toBe(0);
        const dns = await exec("getent hosts registry.npmjs.org example.com");
        expect(dns.exitCode).not.toBe(0);
        expect(dns.stdout).toBe("");
      },
    );

    const list = await runCordon(["sandbox", "list", "--json"], env());
    const summaries = (
      JSON.parse(list.stdout) as {
        sandboxes: { name: string; egress?: { proxy: string; allow: string[]; state: string } }[];
      }
    ).sandboxes;
    const listed = summaries.find((s) => s.egress?.allow.includes("registry.npmjs.org"));
    expect(listed?.egress).toMatchObject({ state: "running", proxy: `${listed?.name}-egress` });

    // Removing the sandbox removes its way out.
    const name = listed?.name ?? "";
    expect((await runCordon(["sandbox", "rm", name], env())).exitCode).toBe(0);
    const docker = dockerClient();
    expect(
      await docker.listContainers({ all: true, filters: { name: [`${name}-egress`] } }),
    ).toEqual([]);
  }, 240_000);

  it("cordon reaches squid through its container, not its network: cut off from the bridge, squid still answers", async () => {
    await withSandbox(
      `channel-${suffix}`,
      { allowHosts: ["registry.npmjs.org"] },
      async ({ plan, lease }, decisions) => {
        const proxy = plan.sandbox.spec?.egress?.proxyContainer ?? "";
        const docker = dockerClient();
        const info = await docker.getContainer(proxy).inspect();
        expect(info.HostConfig.PortBindings ?? {}).toEqual({});
        // Its only network goes: no address of squid is left that a host process could reach.
        await docker.getNetwork("bridge").disconnect({ Container: proxy, Force: true });
        const after = await docker.getContainer(proxy).inspect();
        expect(Object.keys(after.NetworkSettings.Networks)).toEqual([]);
        const refused = await lease.sandbox.exec(
          // An address, not a name: squid's to_localhost check would wait on DNS it cannot reach.
          "curl -sS -m 30 -o /dev/null -w '%{http_code}' https://192.0.2.1/ 2>&1",
          { timeoutMs: 60_000 },
        );
        // squid's own answer, through the sandbox's port and cordon's executor in squid's
        // container; an allowed host would need the network squid no longer has.
        expect(refused.stdout).toMatch(/403/);
        expect(await decisionFor(decisions, "192.0.2.1")).toMatchObject({ allowed: false });
        // cordon's executor there runs as nobody, not as squid's user.
        const top = (await docker.getContainer(proxy).top({ ps_args: "-o pid,user:12,args" })) as {
          Processes: string[][];
        };
        const executor = top.Processes.find((row) => row.join(" ").includes("/.cordon/executor"));
        expect(executor?.[1]).toMatch(/^(nobody|65534)$/);
      },
    );
  }, 120_000);

  it("without an allowlist the sandbox has no network at all and no proxy", async () => {
    await withSandbox(`none-${suffix}`, {}, async ({ plan, lease }) => {
      expect(plan.sandbox.spec?.egress).toBeUndefined();
      expect(plan.sandbox.spec?.docker.network).toBe("none");
      const curl = await lease.sandbox.exec("curl -sS -m 10 https://registry.npmjs.org/ 2>&1", {
        timeoutMs: 30_000,
      });
      expect(curl.exitCode).not.toBe(0);
      const name = plan.sandbox.spec?.containerName ?? "";
      const proxies = await dockerClient().listContainers({
        all: true,
        filters: { name: [`${name}-egress`] },
      });
      expect(proxies).toEqual([]);
    });
  }, 120_000);

  it("prune removes the proxy of a sandbox removed by hand", async () => {
    const name = await withSandbox(
      `orphan-${suffix}`,
      { allowHosts: ["registry.npmjs.org"] },
      ({ plan }) => Promise.resolve(plan.sandbox.spec?.containerName ?? ""),
    );
    const docker = dockerClient();
    await docker.getContainer(name).remove({ force: true });
    expect(
      await docker.listContainers({ all: true, filters: { name: [`${name}-egress`] } }),
    ).not.toEqual([]);
    const inventory = new SandboxInventory({ engine: new DockerEngine(), stateDirectory: home });
    // The grace that spares a sandbox being created in another process is the test's to skip.
    const report = await inventory.prune({ orphanMinAgeMs: 0 });
    expect(report.orphans.map((o) => o.reason).join("\n")).toMatch(`egress proxy of ${name}`);
    expect(
      await docker.listContainers({ all: true, filters: { name: [`${name}-egress`] } }),
    ).toEqual([]);
  }, 120_000);
});
