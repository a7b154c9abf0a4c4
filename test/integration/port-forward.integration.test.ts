import { spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import http from "node:http";
import net from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";

import { afterAll, beforeAll, describe, expect, it } from "vitest";

import type { ListedJson } from "../../src/cli/commands/sandbox-list.js";
import { createRunner, type Runner } from "../../src/index.js";
import { PortClosedError } from "../../src/sandbox/docker/resident/resident-connection.js";
import { demoRepo } from "../support/demo-repo.js";
import {
  dockerClient,
  execIn,
  removeContainersOfHome,
  requireSandboxImage,
} from "../support/docker.js";
import { builtCli, runBuiltCordon } from "../support/spawn-cordon.js";
import { removeStateDirectory } from "../support/state-directory.js";

/**
 * GETs `url` through the forward, again while the server in the sandbox is still starting (the
 * forward closes a connection at once while nothing listens there). A request that moves no byte
 * for a minute fails the test at once, saying so, rather than being tried again: a stuck channel
 * is a bug, not a server starting.
 */
async function getWhenUp(url: string): Promise<Buffer> {
  let last: unknown;
  for (let attempt = 0; attempt < 150; attempt += 1) {
    try {
      return await get(url);
    } catch (error) {
      if (error instanceof StalledError) throw error;
      last = error;
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
  }
  throw new Error(`${url} never answered: ${String(last)}`);
}

class StalledError extends Error {}

/**
 * One GET by node:http, not the global fetch: Node 20's fetch (undici 6) compiles its HTTP parser
 * during its first connection and only then listens for the socket's close, so a first connection
 * closed meanwhile leaves that fetch waiting forever. The forward closes at once while the
 * server is starting, which made the first request of this file hang 1 run in about 10.
 */
function get(url: string): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const request = http.get(url, { agent: false }, (response) => {
      const chunks: Buffer[] = [];
      response.on("data", (chunk: Buffer) => chunks.push(chunk));
      response.on("error", reject);
      response.on("end", () =>
        response.complete
          ? resolve(Buffer.concat(chunks))
          : reject(new Error(`${url}: the answer was cut short`)),
      );
    });
    request.on("error", reject);
    request.setTimeout(60_000, () =>
      request.destroy(new StalledError(`${url}: no byte through the forward for 60 s`)),
    );
  });
}

/**
 * `cordon port-forward` as a library call: a server the agent started in a network-none sandbox
 * answers on this host's loopback, over the executor's stream, and the sandbox still has no
 * network.
 */
describe("port-forward", () => {
  let root: string;
  let home: string;
  let runner: Runner;
  let repo: string;
  const session = "preview";

  beforeAll(async () => {
    await requireSandboxImage();
    root = await mkdtemp(path.join(tmpdir(), "cordon-port-forward-"));
    home = path.join(root, "state");
    repo = await demoRepo();
    runner = createRunner({
      env: { ...process.env, CORDON_HOME: home, CORDON_CONFIG: "" },
      workspace: repo,
    });
  });

  afterAll(async () => {
    await removeContainersOfHome(home);
    await removeStateDirectory(home);
    await rm(root, { recursive: true, force: true });
  });

  it("reaches a server started in a network-none sandbox; the sandbox still has no network", async () => {
    const big = await runner.callTool(
      "exec",
      { command: "head -c 3000000 /dev/urandom > big.bin && sha256sum big.bin" },
      { sessionKey: session },
    );
    expect(big.isError).toBe(false);
    const started = await runner.callTool(
      "exec",
      { command: "python3 -m http.server 8000 --bind 127.0.0.1", background: true },
      { sessionKey: session },
    );
    expect(started.isError).toBe(false);

    const errors: unknown[] = [];
    const forward = await runner.forwardPort({
      sessionKey: session,
      remotePort: 8000,
      onError: (error) => errors.push(error),
    });
    try {
      expect(forward.address).toBe("127.0.0.1");
      expect(forward.localPort).toBeGreaterThan(0);
      const listing = (await getWhenUp(`http://127.0.0.1:${forward.localPort}/`)).toString();
      expect(listing).toContain("big.bin");
      // 3 MB through the channel's windows, byte for byte.
      const body = await getWhenUp(`http://127.0.0.1:${forward.localPort}/big.bin`);
      const text = big.content.map((block) => ("text" in block ? block.text : "")).join("");
      expect(text).toContain(createHash("sha256").update(body).digest("hex"));
      // Several at once, each its own channel.
      const many = await Promise.all(
        Array.from({ length: 8 }, () => getWhenUp(`http://127.0.0.1:${forward.localPort}/`)),
      );
      for (const page of many) expect(page.toString()).toContain("big.bin");

      // The sandbox is as it was: network none, nothing but loopback, no route anywhere.
      const container = dockerClient().getContainer(forward.sandbox);
      const info = await container.inspect();
      expect(info.HostConfig.NetworkMode).toBe("none");
      const routes = await execIn(container, ["cat", "/proc/net/route", "/proc/net/dev"]);
      expect(routes.stdout.split("\n").slice(1).join("\n")).not.toMatch(/eth|^\w+\s+[0-9A-F]{8}/m);
    } finally {
      await forward.close();
    }
    // Only while the server was still starting: nothing listened yet.
    for (const error of errors) expect(error).toBeInstanceOf(PortClosedError);
    // Closed: nothing listens here any more.
    await expect(
      new Promise((resolve, reject) => {
        const socket = net.connect(forward.localPort, "127.0.0.1", () => resolve(socket));
        socket.on("error", reject);
      }),
    ).rejects.toMatchObject({ code: "ECONNREFUSED" });
  });

  it("says nothing listens there, and keeps forwarding for when something does", async () => {
    const errors: unknown[] = [];
    const forward = await runner.forwardPort({
      sessionKey: session,
      remotePort: 8111,
      onError: (error) => errors.push(error),
    });
    try {
      await expect(get(`http://127.0.0.1:${forward.localPort}/`)).rejects.toThrow();
      expect(errors[0]).toBeInstanceOf(PortClosedError);
      expect((errors[0] as PortClosedError).message).toMatch(
        /^nothing listens on port 8111 in cordon-.* \(127\.0\.0\.1\)$/,
      );
      await runner.callTool(
        "exec",
        { command: "python3 -m http.server 8111 --bind 127.0.0.1", background: true },
        { sessionKey: session },
      );
      expect((await getWhenUp(`http://127.0.0.1:${forward.localPort}/`)).toString()).toContain(
        "Directory listing",
      );
    } finally {
      await forward.close();
    }
  });

  const cordon = async (args: string[]): Promise<string> => {
    const finished = await runBuiltCordon(args, {
      env: { ...process.env, CORDON_HOME: home, CORDON_CONFIG: "", CORDON_LOG_LEVEL: "silent" },
      cwd: repo,
    });
    expect(finished.code, finished.stderr).toBe(0);
    return finished.stdout.toString();
  };
  const forwardsListed = async (): Promise<unknown[]> => {
    const listed = JSON.parse(await cordon(["sandbox", "list", "--json"])) as ListedJson;
    return listed.sandboxes.flatMap((sandbox) => sandbox.forwards);
  };

  it("cordon port-forward serves until Ctrl-C, then says what it stopped (exit 130); meanwhile list and explain show it, and it holds the sandbox", async () => {
    await runner.callTool(
      "exec",
      { command: "python3 -m http.server 8222 --bind 127.0.0.1", background: true },
      { sessionKey: session },
    );
    const child = spawn(
      process.execPath,
      [builtCli, "port-forward", "--workspace", repo, "--session", session, ":8222"],
      {
        env: { ...process.env, CORDON_HOME: home, CORDON_CONFIG: "", CORDON_LOG_LEVEL: "silent" },
        stdio: ["ignore", "pipe", "pipe"],
      },
    );
    let stdout = "";
    let stderr = "";
    child.stdout.setEncoding("utf8").on("data", (text: string) => (stdout += text));
    child.stderr.setEncoding("utf8").on("data", (text: string) => (stderr += text));
    const exited = new Promise<number | null>((resolve) => child.on("close", resolve));
    try {
      for (let attempt = 0; attempt < 600 && !/\n/.test(stdout); attempt += 1) {
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      const line = /^Forwarding from 127\.0\.0\.1:(\d+) -> 8222 in (cordon-\S+)\n$/.exec(stdout);
      expect(line, stderr).not.toBeNull();
      const listing = await getWhenUp(`http://127.0.0.1:${line?.[1]}/`);
      expect(listing.toString()).toContain("Directory listing");

      // Other processes see the forward: list and explain show it, and the run-end stop of
      // another process keeps the sandbox it serves.
      const shown = { sandbox: line?.[2], localPort: Number(line?.[1]), remotePort: 8222 };
      expect(await forwardsListed()).toEqual([expect.objectContaining(shown)]);
      const explained = await cordon(["sandbox", "explain", "--session", session, "--json"]);
      expect((JSON.parse(explained) as { forwards: unknown[] }).forwards).toEqual([
        expect.objectContaining({
          ...shown,
          holder: expect.objectContaining({ pid: child.pid }) as unknown,
        }),
      ]);
      expect(await cordon(["sandbox", "explain", "--session", session])).toMatch(
        new RegExp(
          `\\nforwards  127\\.0\\.0\\.1:${shown.localPort} -> 8222 \\(pid ${child.pid}\\)\\n`,
        ),
      );
      const other = createRunner({
        env: { ...process.env, CORDON_HOME: home, CORDON_CONFIG: "" },
        workspace: repo,
      });
      await expect(other.disposeSandbox({ sessionKey: session }, "stop")).resolves.toMatchObject({
        outcome: "kept",
        reason: `held by cordon port-forward 127.0.0.1:${shown.localPort} -> 8222 (pid ${child.pid})`,
      });
    } finally {
      child.kill("SIGINT");
    }
    expect(await exited).toBe(130);
    expect(await forwardsListed()).toEqual([]);
    expect(stderr).toMatch(
      /cordon: SIGINT: stopped forwarding 127\.0\.0\.1:\d+ -> 8222 in cordon-\S+; the sandbox keeps running\n$/,
    );
  });

  it("refuses a local port in use, naming the fix", async () => {
    const holder = net.createServer();
    await new Promise<void>((resolve) => holder.listen(0, "127.0.0.1", resolve));
    const { port } = holder.address() as net.AddressInfo;
    try {
      await expect(
        runner.forwardPort({ sessionKey: session, remotePort: 8000, localPort: port }),
      ).rejects.toMatchObject({
        message: `127.0.0.1:${port} is in use on this host`,
        fix: expect.stringMatching(/LOCAL:REMOTE/) as unknown,
      });
    } finally {
      holder.close();
    }
  });
});
