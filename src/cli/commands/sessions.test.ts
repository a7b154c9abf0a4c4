import { mkdtemp, realpath } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";

import { describe, expect, it } from "vitest";

import { workspaceIdOf } from "../../policy/index.js";
import {
  JsonlSession,
  RunEventsLog,
  acquireSessionLock,
  sessionFiles,
  writeRunRecord,
} from "../../runner/index.js";
import { runCli } from "../run-cli.js";

/** `columns`: stdout and stderr are a terminal that wide (default: captured, as a pipe). */
async function cordon(args: string[], home: string, columns?: number) {
  let out = "";
  let err = "";
  const terminal = { isTTY: true, columns };
  const code = await runCli(
    ["node", "cordon", ...args],
    { CORDON_HOME: home, CORDON_LOG_LEVEL: "silent" },
    {
      stdout: (t) => (out += t),
      stderr: (t) => (err += t),
      streams: columns === undefined ? undefined : { stdout: terminal, stderr: terminal },
    },
  );
  return { code, out, err };
}

describe("cordon sessions", () => {
  it("lists and shows a project's sessions; another project with the same key sees none of them", async () => {
    const home = await mkdtemp(path.join(tmpdir(), "cordon-sessions-"));
    const projectA = await mkdtemp(path.join(tmpdir(), "cordon-sessions-a-"));
    const projectB = await mkdtemp(path.join(tmpdir(), "cordon-sessions-b-"));
    const session = await JsonlSession.open({
      stateDir: home,
      sessionKey: "agent:main:fix",
      project: workspaceIdOf(await realpath(projectA)),
    });
    await session.append({ role: "user", content: [{ type: "text", text: "fix the test" }] });
    await session.append(
      {
        role: "assistant",
        content: [{ type: "tool_use", id: "t1", name: "exec", input: { command: "ls" } }],
      },
      { model: "m", stopReason: "tool_use" },
    );
    await session.close();
    const keysOf = (out: string) =>
      (JSON.parse(out) as { sessionKey: string }[]).map((s) => s.sessionKey);

    const list = await cordon(["sessions", "list", "--json", "--workspace", projectA], home);
    expect(list.code).toBe(0);
    expect(keysOf(list.out)).toEqual(["agent:main:fix"]);
    const show = await cordon(
      ["sessions", "show", "agent:main:fix", "--workspace", projectA],
      home,
    );
    expect(show.code).toBe(0);
    expect(show.out).toContain("fix the test");
    expect(show.out).toContain('[tool_use exec] {"command":"ls"}');

    const other = await cordon(["sessions", "list", "--json", "--workspace", projectB], home);
    expect(keysOf(other.out)).toEqual([]);
    const leak = await cordon(
      ["sessions", "show", "agent:main:fix", "--workspace", projectB],
      home,
    );
    expect(leak.code).toBe(2);
    expect(leak.out).toBe("");
    const all = await cordon(["sessions", "list", "--all", "--json"], home);
    expect(keysOf(all.out)).toEqual(["agent:main:fix"]);

    // On a terminal the table fits its width; --wide and a pipe get every column.
    const narrow = await cordon(["sessions", "list", "--workspace", projectA], home, 60);
    const lines = narrow.out.trimEnd().split("\n");
    expect(Math.max(...lines.map((line) => line.length))).toBeLessThanOrEqual(60);
    expect(lines[0]).toMatch(/^SESSION +.*LAST ACTIVITY/);
    expect(lines[0]).not.toContain("TOKENS");
    const wide = await cordon(["sessions", "list", "--wide", "--workspace", projectA], home, 60);
    expect(wide.out).toMatch(/PARENT +AGENT +LAST RUN +TURNS +TOKENS/);
    const piped = await cordon(["sessions", "list", "--workspace", projectA], home);
    expect(piped.out).toBe(wide.out);
  });

  it("names the fix for an unknown session (exit 2)", async () => {
    const home = await mkdtemp(path.join(tmpdir(), "cordon-sessions-"));
    const show = await cordon(["sessions", "show", "agent:main:nope", "--workspace", home], home);
    expect(show.code).toBe(2);
    expect(show.err).toMatch(/cordon sessions list/);
  });

  async function projectWithSessions(names: string[]) {
    const home = await mkdtemp(path.join(tmpdir(), "cordon-sessions-"));
    const workspace = await realpath(await mkdtemp(path.join(tmpdir(), "cordon-sessions-ws-")));
    const project = workspaceIdOf(workspace);
    for (const name of names) {
      const session = await JsonlSession.open({ stateDir: home, sessionKey: name, project });
      await session.append({ role: "user", content: [{ type: "text", text: `task of ${name}` }] });
      for (const turn of [1, 2]) {
        await session.append(
          { role: "assistant", content: [{ type: "text", text: `answer ${turn}` }] },
          {
            model: "m",
            stopReason: "end_turn",
            usage: { inputTokens: 1000, outputTokens: 50, cacheReadTokens: 0, cacheWriteTokens: 0 },
          },
        );
      }
      await session.close();
    }
    return { home, workspace, project };
  }

  it("list shows each session's agent, workspace, last run, turns, tokens and last activity", async () => {
    const { home, workspace, project } = await projectWithSessions(["agent:main:fix-1"]);
    const log = new RunEventsLog("run-1");
    log.attach(sessionFiles(home, "agent:main:fix-1", project).events);
    log.record({ type: "run-start" });
    const plan = { type: "plan", agentId: "main", workspace };
    log.record(plan);
    const end = { type: "run-end", status: "limit_turns", turns: 2 };
    log.record(end);
    await log.flushed();

    const json = await cordon(["sessions", "list", "--json", "--workspace", workspace], home);
    expect(json.code).toBe(0);
    expect(JSON.parse(json.out)).toEqual([
      expect.objectContaining({
        sessionKey: "agent:main:fix-1",
        agentId: "main",
        workspace,
        lastRunStatus: "limit_turns",
        turns: 2,
        tokens: { input: 2000, output: 100 },
      }),
    ]);
    const text = await cordon(["sessions", "list", "--workspace", workspace], home);
    const [header, row] = text.out.trim().split("\n");
    expect(header).toMatch(
      /^SESSION\s+PARENT\s+AGENT\s+LAST RUN\s+TURNS\s+TOKENS\s+LAST ACTIVITY\s+WORKSPACE$/,
    );
    expect(row).toMatch(
      /^agent:main:fix-1\s+-\s+main\s+limit_turns\s+2\s+2\.0k in \/ 100 out\s+\d+s ago\s+/,
    );
    expect(row?.endsWith(workspace)).toBe(true);

    // While a run holds the session, its last run is "running".
    const lock = await acquireSessionLock({
      stateDir: home,
      sessionKey: "agent:main:fix-1",
      project,
      runId: "live",
    });
    const live = await cordon(["sessions", "list", "--json", "--workspace", workspace], home);
    expect(JSON.parse(live.out)).toEqual([expect.objectContaining({ lastRunStatus: "running" })]);
    await lock.release();
  });

  it("list shows a subagent's session under the session that spawned it", async () => {
    const child = "agent:main:sub:0123456789ab";
    const { home, workspace, project } = await projectWithSessions([
      "agent:main:main",
      "agent:main:other",
      child,
    ]);
    await writeRunRecord(home, {
      v: 1,
      runId: "7e0c6a4e-0000-4000-8000-000000000001",
      childSessionKey: child,
      childAgentId: "main",
      childProject: project,
      requesterSessionKey: "agent:main:main",
      requesterAgentId: "main",
      requesterProject: project,
      task: "count the files",
      cleanup: "keep",
      createdAt: new Date().toISOString(),
      outcome: "ok",
    });
    const text = await cordon(["sessions", "list", "--workspace", workspace], home);
    const rows = text.out.trim().split("\n").slice(1);
    const main = rows.findIndex((row) => row.startsWith("agent:main:main "));
    expect(rows[main + 1]).toMatch(/^└ agent:main:sub:0123456789ab\s+agent:main:main\s+main\s/);
    expect(rows.find((row) => row.startsWith("agent:main:other"))).toMatch(
      /^agent:main:other\s+-\s+main/,
    );
    const json = await cordon(["sessions", "list", "--json", "--workspace", workspace], home);
    const listed = JSON.parse(json.out) as {
      sessionKey: string;
      parent?: string;
      subagent?: { task: string; outcome: string };
    }[];
    expect(listed.find((s) => s.sessionKey === child)).toMatchObject({
      parent: "agent:main:main",
      subagent: { task: "count the files", outcome: "ok" },
    });
  });

  it("show takes a session's name or a unique prefix; an ambiguous one lists the matches", async () => {
    const { home, workspace } = await projectWithSessions([
      "agent:main:fix-login",
      "agent:main:feature-x",
      "agent:main:main",
    ]);
    const show = (name: string) =>
      cordon(["sessions", "show", name, "--workspace", workspace], home);
    expect((await show("fix-login")).out).toContain("task of agent:main:fix-login");
    expect((await show("fi")).out).toContain("task of agent:main:fix-login");
    expect((await show("agent:main:fe")).out).toContain("task of agent:main:feature-x");
    expect((await show("main")).out).toContain("task of agent:main:main");
    const ambiguous = await show("f");
    expect(ambiguous.code).toBe(2);
    expect(ambiguous.err).toContain("agent:main:fix-login");
    expect(ambiguous.err).toContain("agent:main:feature-x");
    const unknown = await show("nothing-like-it");
    expect(unknown.code).toBe(2);
    expect(unknown.err).toContain("agent:main:fix-login");
  });

  it("rm deletes a session, but not while a run holds it (exit 3)", async () => {
    const { home, workspace, project } = await projectWithSessions([
      "agent:main:old",
      "agent:main:busy",
    ]);
    const lock = await acquireSessionLock({
      stateDir: home,
      sessionKey: "agent:main:busy",
      project,
      runId: "live",
    });
    const refused = await cordon(["sessions", "rm", "busy", "--workspace", workspace], home);
    expect(refused.code).toBe(3);
    expect(refused.err).toContain("agent:main:busy is in use");
    await lock.release();

    const removed = await cordon(["sessions", "rm", "old", "--workspace", workspace], home);
    expect(removed.code).toBe(0);
    expect(removed.out).toBe("agent:main:old\n");
    const list = await cordon(["sessions", "list", "--json", "--workspace", workspace], home);
    expect((JSON.parse(list.out) as { sessionKey: string }[]).map((s) => s.sessionKey)).toEqual([
      "agent:main:busy",
    ]);
  });
});
