/**
 * "No sandbox has a route to the host" (docs/network.md, "No route out"; DESIGN.md §10), as an
 * attacker inside the sandbox would try it. A service on the host listens on 0.0.0.0, and an
 * internal Docker network like the ones sandboxes used to sit on gives the host one more bridge
 * address. From a default sandbox, an `--allow-host` sandbox and a claude-code sandbox, every
 * address of the host (each interface's, 172.17.0.1, that network's gateway, loopback) is probed
 * directly and through the proxy, and a DNS query is made: all fail, the service counts no
 * request, and the sandbox's only interface is loopback. What must still work does: the allowed
 * host through the forwarded proxy port (a refused one is an `egress` event), a second executor
 * listening on the same port beside the first (another cordon process attached), and the model
 * gateway through its own forwarded port. CORDON_TEST_RUNTIME=runsc runs it all under gVisor.
 */
import { createServer, type Server } from "node:http";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import type { AddressInfo } from "node:net";
import { networkInterfaces, tmpdir } from "node:os";
import path from "node:path";

import { afterAll, beforeAll, describe, expect, it } from "vitest";

import { createRunner, type Runner } from "../../src/runner/index.js";

/** A sandbox the runner holds for a test, with the plan it was acquired by. */
type HeldSandbox = Awaited<ReturnType<Runner["acquireSandbox"]>>;
import { DockerSandbox, createModelGateway, type EgressDecision } from "../../src/sandbox/index.js";
import { proxyChannel } from "../../src/sandbox/docker/egress/proxy-channel.js";
import { DockerEngine } from "../../src/sandbox/index.js";
import { demoRepo } from "../support/demo-repo.js";
import { dockerClient, requireSandboxImage } from "../support/docker.js";
import { startMessagesApiServer, type MessagesApiServer } from "../support/messages-api-server.js";
import { runCordon } from "../support/run-cli.js";
import { testRuntime } from "../support/sandbox-spec.js";
import { removeStateDirectory } from "../support/state-directory.js";

const suffix = `${process.pid}-${Date.now().toString(36)}`;
const legacyNetwork = `cordon-test-internal-${suffix}`;

describe("no route to the host from any sandbox", () => {
  let home: string;
  let repo: string;
  let config: string;
  let image: string;
  let hostService: Server;
  let hostPort: number;
  let hostHits = 0;
  let api: MessagesApiServer;
  /** Every address of the host a sandbox could try. */
  let hostAddresses: string[];
  const env = (): NodeJS.ProcessEnv => ({
    CORDON_HOME: home,
    CORDON_CONFIG: "",
    ...(testRuntime ? { CORDON_RUNTIME: testRuntime } : {}),
  });

  beforeAll(async () => {
    image = await requireSandboxImage();
    home = await mkdtemp(path.join(tmpdir(), "cordon-noroute-home-"));
    repo = await demoRepo();
    // The sandbox image for claude-code too (no agent image needed to probe its network), and
    // the host's CA bundle for the registry behind this machine's TLS-inspecting egress.
    config = path.join(home, "config.json5");
    await writeFile(
      config,
      `{ agents: { defaults: { sandbox: { docker: { image: ${JSON.stringify(image)} }, egress: { trustHostCertificates: true } } } } }\n`,
    );
    hostService = createServer((_request, response) => {
      hostHits += 1;
      response.end("host service\n");
    });
    await new Promise<void>((resolve) => hostService.listen(0, "0.0.0.0", resolve));
    hostPort = (hostService.address() as AddressInfo).port;
    api = await startMessagesApiServer();
    const network = await dockerClient().createNetwork({
      Name: legacyNetwork,
      Internal: true,
      Labels: { "cordon.test": "1" },
    });
    const gateway = (await network.inspect()) as { IPAM: { Config: { Gateway?: string }[] } };
    hostAddresses = [
      ...new Set([
        "127.0.0.1",
        "172.17.0.1",
        // A cloud's metadata service.
        "169.254.169.254",
        ...gateway.IPAM.Config.flatMap((entry) => (entry.Gateway ? [entry.Gateway] : [])),
        ...Object.values(networkInterfaces())
          .flat()
          .flatMap((entry) => (entry?.family === "IPv4" ? [entry.address] : [])),
      ]),
    ];
  });

  afterAll(async () => {
    await runCordon(["sandbox", "rm", "--all"], env()).catch(() => undefined);
    await dockerClient()
      .getNetwork(legacyNetwork)
      .remove()
      .catch(() => undefined);
    await new Promise((resolve) => hostService?.close(resolve));
    await api?.close();
    await removeStateDirectory(home);
    await rm(path.dirname(repo), { recursive: true, force: true });
  });

  async function withSandbox(
    sessionKey: string,
    options: { allowHosts?: string[]; runtime?: "claude-code" },
    fn: (held: HeldSandbox, decisions: EgressDecision[]) => Promise<void>,
  ): Promise<void> {
    const runner = createRunner({
      env: env(),
      workspace: repo,
      configPath: config,
      allowHosts: options.allowHosts,
      runtime: options.runtime,
    });
    const decisions: EgressDecision[] = [];
    const held = await runner.acquireSandbox({
      sessionKey: `${sessionKey}-${suffix}`,
      onEgress: (decision) => decisions.push(decision),
    });
    try {
      await fn(held, decisions);
    } catch (error) {
      throw new Error(`in ${held.plan.sandbox.spec?.containerName}: ${String(error)}`, {
        cause: error,
      });
    } finally {
      await held.lease.release();
    }
  }

  /** Every way to the host from inside, each printed as `name: outcome`; none may succeed. */
  async function probeHost(held: HeldSandbox): Promise<void> {
    const before = hostHits;
    const probes = hostAddresses.flatMap((address) => [
      `echo "direct ${address}: $(curl --noproxy '*' -sS -m 3 -o /dev/null -w '%{http_code}' http://${address}:${hostPort}/ 2>&1)"`,
      `echo "tcp ${address}: $(timeout 3 bash -c 'exec 3<>/dev/tcp/${address}/${hostPort} && echo CONNECTED' 2>&1)"`,
      // Through the forwarded proxy port, where there is one: squid refuses addresses.
      `echo "proxied ${address}: $(curl -sS -m 5 -o /dev/null -w '%{http_code}' http://${address}:${hostPort}/ 2>&1)"`,
    ]);
    const result = await held.lease.sandbox.exec(
      [
        ...probes,
        `echo "dns: $(getent hosts example.com registry.npmjs.org 2>&1 || echo failed)"`,
        `echo "udp dns: $(timeout 3 bash -c 'exec 3<>/dev/udp/8.8.8.8/53 && echo CONNECTED' 2>&1)"`,
        // /proc/net/dev rather than `ip` (not in the image) or /sys/class/net (empty under gVisor).
        "echo \"interfaces: $(tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' ' | tr '\\n' ' ')\"",
        'echo "routes: $(tail -n +2 /proc/net/route | wc -l)"',
      ].join("\n"),
      { timeoutMs: 240_000 },
    );
    const lines = result.stdout.trim().split("\n");
    const report = result.stdout;
    for (const line of lines.filter((l) => /^(direct|tcp|proxied) /.test(l))) {
      expect(line, report).not.toMatch(/CONNECTED|: 200$/);
    }
    expect(lines.filter((l) => /^(direct|tcp|proxied) /.test(l))).toHaveLength(
      hostAddresses.length * 3,
    );
    expect(report).toMatch(/^dns: failed$/m);
    expect(report).not.toMatch(/^udp dns: .*CONNECTED/m);
    expect(report).toMatch(/^interfaces: lo $/m);
    expect(report).toMatch(/^routes: 0$/m);
    expect(hostHits, report).toBe(before);
  }

  it("a default sandbox: nothing but loopback, no address of the host answers", async () => {
    await withSandbox("plain", {}, async (held) => {
      expect(held.plan.sandbox.spec?.egress).toBeUndefined();
      await probeHost(held);
    });
  }, 300_000);

  it("an --allow-host sandbox: the allowed host through the forwarded proxy, the host never", async () => {
    await withSandbox("allow", { allowHosts: ["deb.debian.org"] }, async (held, decisions) => {
      const spec = held.plan.sandbox.spec;
      expect(spec?.docker.network).toBe("none");
      const exec = (command: string) => held.lease.sandbox.exec(command, { timeoutMs: 60_000 });
      const allowed = await exec(
        "curl -sS -m 30 -o /dev/null -w '%{http_code}' http://deb.debian.org/debian/",
      );
      expect(allowed.stdout, allowed.stderr).toBe("200");
      const refused = await exec(
        "curl -sS -m 30 -o /dev/null -w '%{http_code}' http://example.com/",
      );
      expect(refused.stdout).toBe("403");
      await probeHost(held);
      // Nor another container: not even its own proxy, at its address, without the channel.
      const proxy = (await dockerClient()
        .getContainer(spec?.egress?.proxyContainer ?? "")
        .inspect()) as { NetworkSettings: { Networks: Record<string, { IPAddress: string }> } };
      const proxyAddress = proxy.NetworkSettings.Networks["bridge"]?.IPAddress ?? "";
      expect(proxyAddress).not.toBe("");
      const direct = await exec(
        `curl --noproxy '*' -sS -m 5 -o /dev/null http://${proxyAddress}:3128/ 2>&1; echo " exit $?"`,
      );
      expect(direct.stdout).toMatch(/Couldn't connect|unreachable/i);
      expect(direct.stdout).not.toMatch(/ exit 0$/);
      await waitFor(() => decisions.some((d) => d.host === "example.com" && !d.allowed));
      expect(decisions).toContainEqual(
        expect.objectContaining({ host: "deb.debian.org", allowed: true }),
      );
      // Squid refused the host's own addresses too: each is an event, none reached the host.
      expect(decisions.filter((d) => d.host === "172.17.0.1").every((d) => !d.allowed)).toBe(true);

      // Another executor in the same container (what a second cordon process attached to this
      // sandbox runs) listens on the same port beside the first (SO_REUSEPORT), and the proxy
      // answers whichever accepts. gVisor's host network does not share ports: there the second
      // finds the port held and tries again at its next call.
      const engine = new DockerEngine();
      const container = spec?.containerName ?? "";
      const second = new DockerSandbox({
        engine,
        containerId: container,
        containerName: container,
        workdir: "/workspace",
        // The same uid spelled another way: a connection (an executor) of its own.
        user: (spec?.docker.user ?? "1000:1000").split(":")[0] ?? "1000",
        executor: "resident",
        forwards: [
          {
            port: spec?.egress?.proxyPort ?? 0,
            destination: proxyChannel({
              containers: engine.containers,
              proxyContainer: spec?.egress?.proxyContainer ?? "",
              proxyPort: spec?.egress?.proxyPort ?? 0,
            }).destination,
          },
        ],
      });
      await second.openForwards();
      const listeners = await exec("grep -c ' 0100007F:0C38 00000000:0000 0A ' /proc/net/tcp");
      expect(listeners.stdout.trim()).toBe(testRuntime === "runsc" ? "1" : "2");
      // The agent kills its executor (the same uid can): the call running fails, and the next
      // command finds a new executor already listening.
      const killed = await exec("kill -9 $PPID; sleep 5").then(
        (result) => `exit ${result.exitCode}`,
        (error: unknown) => String(error),
      );
      expect(killed).toMatch(/executor .* stopped/);
      for (let attempt = 0; attempt < 4; attempt += 1) {
        const again = await exec(
          "curl -sS -m 30 -o /dev/null -w '%{http_code}' http://deb.debian.org/debian/",
        );
        expect(again.stdout).toBe("200");
      }
    });
  }, 300_000);

  it("a claude-code sandbox: the model gateway through its own forwarded port, the host never", async () => {
    await withSandbox("claude", { runtime: "claude-code" }, async (held) => {
      expect(held.plan.sandbox.spec?.egress?.allow).toEqual([]);
      const gateway = createModelGateway({
        upstream: api.url,
        credential: { apiKey: "sk-ant-real" },
      });
      const forwarded = await held.lease.forwardPort?.((channel) => gateway.accept(channel));
      try {
        api.enqueue({ kind: "message", content: [{ type: "text", text: "through the channel" }] });
        const call = await held.lease.sandbox.exec(
          `curl -sS -m 30 -H 'x-api-key: ${gateway.placeholderKey}' -H 'content-type: application/json' ` +
            `-d '{"model":"m","max_tokens":1,"messages":[]}' http://127.0.0.1:${forwarded?.port}/v1/messages`,
          { timeoutMs: 60_000 },
        );
        // The scripted server streams its answer: the whole of it came back through the channel.
        expect(call.stdout, call.stderr).toContain('"text":"nnel"');
        expect(call.stdout).toContain('"type":"message_stop"');
        expect(api.requests.at(-1)?.headers["x-api-key"]).toBe("sk-ant-real");
        await probeHost(held);
      } finally {
        forwarded?.close();
        await gateway.close();
      }
    });
  }, 300_000);
});

async function waitFor(condition: () => boolean): Promise<void> {
  for (let attempt = 0; attempt < 100 && !condition(); attempt += 1) {
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  expect(condition()).toBe(true);
}
