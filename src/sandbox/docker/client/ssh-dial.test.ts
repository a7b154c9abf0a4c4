import { chmod, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { request } from "node:http";
import { tmpdir } from "node:os";
import path from "node:path";

import { afterAll, beforeAll, describe, expect, it } from "vitest";

import { sshDialAgent } from "./ssh-dial.js";

/**
 * An `ssh` on PATH that stands in for `ssh HOST docker system dial-stdio`: it notes each start in
 * a log and answers every HTTP request on its stdin with 200 "ok", until stdin ends.
 */
const fakeSsh = `#!/usr/bin/env node
const fs = require("node:fs");
fs.appendFileSync(process.env.FAKE_SSH_LOG, "started\\n");
let buffered = "";
process.stdin.setEncoding("latin1");
process.stdin.on("data", (text) => {
  buffered += text;
  for (let end; (end = buffered.indexOf("\\r\\n\\r\\n")) >= 0; ) {
    buffered = buffered.slice(end + 4);
    process.stdout.write("HTTP/1.1 200 OK\\r\\nContent-Length: 2\\r\\nConnection: keep-alive\\r\\n\\r\\nok");
  }
});
`;

function get(agent: ReturnType<typeof sshDialAgent>, onResponse?: () => void): Promise<string> {
  return new Promise((resolve, reject) => {
    const req = request({ host: "docker", port: 80, path: "/_ping", agent }, (res) => {
      onResponse?.();
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (text: string) => (body += text));
      res.on("end", () => resolve(body));
    });
    req.on("error", reject);
    req.end();
  });
}

describe("sshDialAgent", () => {
  let root: string;
  let log: string;
  let env: NodeJS.ProcessEnv;

  beforeAll(async () => {
    root = await mkdtemp(path.join(tmpdir(), "cordon-ssh-dial-"));
    await writeFile(path.join(root, "ssh"), fakeSsh);
    await chmod(path.join(root, "ssh"), 0o755);
    log = path.join(root, "starts.log");
    env = { ...process.env, PATH: `${root}:${process.env["PATH"] ?? ""}`, FAKE_SSH_LOG: log };
  });

  afterAll(async () => {
    await rm(root, { recursive: true, force: true });
  });

  const starts = async (): Promise<number> =>
    (await readFile(log, "utf8").catch(() => "")).split("\n").filter(Boolean).length;

  it("keeps one ssh for requests one after another: a new one costs a handshake each", async () => {
    await writeFile(log, "");
    const agent = sshDialAgent({ hostname: "box" }, env);
    try {
      for (let i = 0; i < 5; i += 1) expect(await get(agent)).toBe("ok");
      expect(await starts()).toBe(1);
    } finally {
      agent.destroy();
    }
  });

  it("an idle connection holds nothing that keeps the process alive, and is still reused", async () => {
    await writeFile(log, "");
    // What keeps Node's event loop alive: ref'd handles only (an unref'd process or pipe is not
    // listed). The ssh process and its three pipes while a request uses them; none once idle.
    const holding = (): number =>
      process
        .getActiveResourcesInfo()
        .filter((kind) => kind === "ProcessWrap" || kind === "PipeWrap").length;
    const before = holding();
    const agent = sshDialAgent({ hostname: "box" }, env);
    try {
      let during = 0;
      expect(await get(agent, () => (during = holding()))).toBe("ok");
      expect(during).toBe(before + 4);
      // Freed to the agent's pool on the next tick.
      await new Promise((resolve) => setImmediate(resolve));
      expect(holding()).toBe(before);
      expect(await get(agent)).toBe("ok");
      expect(await starts()).toBe(1);
    } finally {
      agent.destroy();
    }
  });
});
