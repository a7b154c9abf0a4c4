/**
 * Several `cordon` processes on one session, as a user makes them from two terminals: the built
 * CLI, a scripted model whose tool calls run long enough in a real sandbox for the runs to overlap.
 * The second run waits for the first (naming it), or exits 3 with `--no-wait`; a run killed with
 * SIGKILL leaves a lock the next run takes over; and the transcript stays one the API accepts.
 * A first run that must still be running holds a gate (its command waits for a file the test
 * creates in its container), never a sleep the machine's load could outlast.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";

import { afterAll, beforeAll, describe, expect, it } from "vitest";

import { packageRoot } from "../../src/common/index.js";
import {
  createRunner,
  readSessionEntries,
  readSessionLock,
  sessionFiles,
  type ContentBlock,
  type SessionEntry,
} from "../../src/runner/index.js";
import { demoRepo } from "../support/demo-repo.js";
import { dockerClient, execIn, requireSandboxImage } from "../support/docker.js";
import { removeStateDirectory } from "../support/state-directory.js";

interface Envelope {
  type: string;
  [key: string]: unknown;
}

interface CliProcess {
  child: ChildProcess;
  events: Envelope[];
  stdout: () => string;
  stderr: () => string;
  /** Resolves with the first stream-json event of this type. */
  waitFor(type: string): Promise<Envelope>;
  exited: Promise<number | null>;
}

type Turn = { content: Record<string, unknown>[] };

const cli = path.join(packageRoot(), "dist", "cli", "main.js");
const suffix = `${process.pid}-${Date.now().toString(36)}`;

const exec = (command: string): Turn => ({
  content: [{ type: "tool_use", name: "exec", input: { command } }],
});
const say = (text: string): Turn => ({ content: [{ type: "text", text }] });
/** A command that runs until the test opens its gate (`openGate`), then prints `<name>-released`. */
const gated = (name: string): string =>
  `until [ -e /tmp/gate-${name} ]; do sleep 0.1; done; echo ${name}-released`;
/** Lets a `gated(name)` command in this container finish. */
async function openGate(container: unknown, name: string): Promise<void> {
  const opened = await execIn(dockerClient().getContainer(String(container)), [
    "touch",
    `/tmp/gate-${name}`,
  ]);
  expect(opened.exitCode, opened.stderr).toBe(0);
}

describe("one session, several cordon processes", () => {
  let home: string;
  let repo: string;
  let scripts: string;
  const sessions: string[] = [];

  const env = (): NodeJS.ProcessEnv => ({
    PATH: process.env["PATH"],
    HOME: process.env["HOME"],
    CORDON_HOME: home,
    CORDON_LOG_LEVEL: "silent",
  });

  function cordon(args: string[]): CliProcess {
    const child = spawn(process.execPath, [cli, ...args], {
      env: env(),
      stdio: ["ignore", "pipe", "pipe"],
    });
    const events: Envelope[] = [];
    const waiters: { type: string; resolve: (event: Envelope) => void }[] = [];
    let stdout = "";
    let stderr = "";
    let buffered = "";
    child.stdout?.setEncoding("utf8").on("data", (chunk: string) => {
      stdout += chunk;
      buffered += chunk;
      for (let newline = buffered.indexOf("\n"); newline >= 0; newline = buffered.indexOf("\n")) {
        const line = buffered.slice(0, newline);
        buffered = buffered.slice(newline + 1);
        if (!line.startsWith("{")) continue;
        const event = JSON.parse(line) as Envelope;
        events.push(event);
        for (const waiter of waiters.filter((w) => w.type === event.type)) waiter.resolve(event);
      }
    });
    child.stderr?.setEncoding("utf8").on("data", (chunk: string) => {
      stderr += chunk;
    });
    const exited = new Promise<number | null>((resolve) =>
      child.on("exit", (code) => resolve(code)),
    );
    return {
      child,
      events,
      stdout: () => stdout,
      stderr: () => stderr,
      exited,
      waitFor: (type) =>
        new Promise((resolve) => {
          const seen = events.find((event) => event.type === type);
          if (seen) resolve(seen);
          else waiters.push({ type, resolve });
        }),
    };
  }

  let scriptCount = 0;
  async function run(
    session: string,
    turns: Turn[],
    options: { format?: "text" | "stream-json"; extra?: string[] } = {},
  ): Promise<CliProcess> {
    scriptCount += 1;
    const script = path.join(scripts, `script-${scriptCount}.json`);
    await writeFile(script, JSON.stringify({ version: 1, turns }));
    return cordon([
      "run",
      "--workspace",
      repo,
      "--session",
      session,
      "--model-script",
      script,
      "--output-format",
      options.format ?? "stream-json",
      ...(options.extra ?? []),
      "do the task",
    ]);
  }

  /** Waits until the process has printed a line matching `pattern` (on stderr by default). */
  async function waitForOutput(
    child: CliProcess,
    pattern: RegExp,
    stream: "stdout" | "stderr" = "stderr",
  ): Promise<void> {
    await expect.poll(() => child[stream](), { timeout: 60_000, interval: 100 }).toMatch(pattern);
  }

  function sessionName(name: string): string {
    const session = `${name}-${suffix}`;
    sessions.push(session);
    return session;
  }

  async function filesOf(session: string) {
    const plan = await createRunner({ env: env(), workspace: repo }).plan({ sessionKey: session });
    return {
      plan,
      files: sessionFiles(home, plan.sessionKey, plan.agent.workspaceId),
      entries: () =>
        readSessionEntries({
          stateDir: home,
          sessionKey: plan.sessionKey,
          project: plan.agent.workspaceId,
        }),
    };
  }

  /**
   * What the Messages API requires of a conversation, checked on the lines as they are sent
   * (consecutive lines of one role go out as one message): roles alternate starting with the user,
   * and each assistant turn's tool calls are all answered in the very next message, by results for
   * exactly those calls.
   */
  function expectValidTranscript(entries: SessionEntry[]): void {
    const messages: { role: string; content: ContentBlock[] }[] = [];
    for (const entry of entries.filter((e) => e.kind === "message")) {
      const last = messages.at(-1);
      if (last?.role === entry.role) last.content = [...last.content, ...entry.content];
      else messages.push({ role: entry.role, content: [...entry.content] });
    }
    expect(messages.length).toBeGreaterThan(0);
    messages.forEach((message, index) => {
      expect(message.role, `message ${index}`).toBe(index % 2 === 0 ? "user" : "assistant");
      const previous = messages[index - 1];
      const calls =
        previous?.role === "assistant"
          ? previous.content.flatMap((b) => (b.type === "tool_use" ? [b.id] : []))
          : [];
      const results = message.content.flatMap((b) =>
        b.type === "tool_result" ? [b.toolUseId] : [],
      );
      expect(results.sort(), `tool results of message ${index}`).toEqual(calls.sort());
    });
  }

  beforeAll(async () => {
    await requireSandboxImage();
    home = await mkdtemp(path.join(tmpdir(), "cordon-sessions-processes-"));
    scripts = await mkdtemp(path.join(tmpdir(), "cordon-sessions-scripts-"));
    repo = await demoRepo();
  });
  afterAll(async () => {
    for (const session of sessions) {
      const name = (await filesOf(session)).plan.sandbox.spec?.containerName;
      if (name) {
        await dockerClient()
          .getContainer(name)
          .remove({ force: true })
          .catch(() => undefined);
      }
    }
    await removeStateDirectory(home);
    await rm(scripts, { recursive: true, force: true });
    await rm(path.dirname(repo), { recursive: true, force: true });
  });

  it("a second run on a busy session waits for the first, naming it, and the transcript stays valid", async () => {
    const session = sessionName("overlap");
    const first = await run(session, [exec(gated("first")), say("first done")]);
    const ready = await first.waitFor("sandbox-ready");
    await first.waitFor("tool-call");
    const second = await run(session, [exec("echo second-ran"), say("second done")], {
      format: "text",
    });
    await waitForOutput(second, /waiting for it to finish/);

    // While it waits, ps lists it as waiting for the first run.
    const ps = cordon(["ps", "--json"]);
    expect(await ps.exited).toBe(0);
    const listed = JSON.parse(ps.stdout()) as Record<string, unknown>[];
    const firstRunId = (await first.waitFor("run-start"))["runId"];
    expect(listed).toContainEqual(
      expect.objectContaining({ sessionKey: `agent:main:${session}`, state: "running" }),
    );
    expect(listed).toContainEqual(
      expect.objectContaining({
        sessionKey: `agent:main:${session}`,
        pid: second.child.pid,
        state: "waiting",
        waitingFor: firstRunId,
        turns: 0,
      }),
    );
    const table = cordon(["ps"]);
    expect(await table.exited).toBe(0);
    expect(table.stdout()).toMatch(
      new RegExp(
        `${second.child.pid} .* waiting for the session \\(held by pid ${first.child.pid}`,
      ),
    );

    await openGate(ready["container"], "first");
    expect(await first.exited).toBe(0);
    expect(await second.exited).toBe(0);
    expect(second.stdout()).toContain("second done");

    const { entries, files } = await filesOf(session);
    const transcript = await entries();
    expectValidTranscript(transcript);
    // The first run's call got its real result, not an "interrupted" one from the second run.
    const results = transcript.flatMap((e) => e.content.filter((b) => b.type === "tool_result"));
    expect(results).toHaveLength(2);
    expect(JSON.stringify(results[0])).toContain("first-released");
    expect(JSON.stringify(results[1])).toContain("second-ran");
    expect(results.every((r) => r.type === "tool_result" && !r.isError)).toBe(true);
    expect(second.stderr()).toMatch(
      new RegExp(
        `session agent:main:${session} is in use by pid ${first.child.pid} on .+ since \\d{4}-`,
      ),
    );
    expect(await readSessionLock(files.lock)).toBeUndefined();
  });

  it("--no-wait on a busy session exits 3 at once, naming the session; the running one is untouched", async () => {
    const session = sessionName("nowait");
    const first = await run(session, [exec(gated("nowait")), say("first done")]);
    const ready = await first.waitFor("sandbox-ready");
    await first.waitFor("tool-call");
    const impatient = await run(session, [say("never asked")], {
      format: "text",
      extra: ["--no-wait"],
    });

    expect(await impatient.exited).toBe(3);
    expect(impatient.stderr()).toContain(`Session agent:main:${session} is in use by another run`);
    expect(impatient.stderr()).toContain(`pid ${first.child.pid}`);
    await openGate(ready["container"], "nowait");
    expect(await first.exited).toBe(0);
    const transcript = await (await filesOf(session)).entries();
    expectValidTranscript(transcript);
    expect(JSON.stringify(transcript)).not.toContain("never asked");
  });

  it("the lock of a run killed with SIGKILL is taken over by the next run, which repairs the transcript", async () => {
    const session = sessionName("killed");
    const first = await run(session, [exec(gated("killed")), say("never said")]);
    await first.waitFor("tool-call");
    const { files, entries } = await filesOf(session);
    first.child.kill("SIGKILL");
    await first.exited;
    expect((await readSessionLock(files.lock))?.pid).toBe(first.child.pid);

    const next = await run(session, [say("picked up")], { extra: ["--no-wait"] });
    expect(await next.exited).toBe(0);
    expect(next.events.some((event) => event.type === "session-wait")).toBe(false);
    expect(next.events.at(-1)).toMatchObject({ type: "run-end", status: "completed" });
    const transcript = await entries();
    expectValidTranscript(transcript);
    const results = transcript.flatMap((e) => e.content.filter((b) => b.type === "tool_result"));
    expect(results).toEqual([
      expect.objectContaining({
        isError: true,
        content: [{ type: "text", text: expect.stringContaining("interrupted") as unknown }],
      }),
    ]);
    expect(await readSessionLock(files.lock)).toBeUndefined();
  });

  it("ps shows a live run with its sandbox, and logs -f follows it until it ends", async () => {
    const session = sessionName("watched");
    const running = await run(session, [exec(gated("watched")), say("watched done")]);
    const ready = await running.waitFor("sandbox-ready");
    await running.waitFor("tool-call");

    const ps = cordon(["ps", "--json"]);
    const follow = cordon(["logs", "-f", "--workspace", repo, "--session", session]);
    expect(await ps.exited).toBe(0);
    // logs -f has printed what happened so far, and follows.
    await waitForOutput(follow, /→ exec until/, "stdout");
    expect(JSON.parse(ps.stdout())).toContainEqual(
      expect.objectContaining({
        sessionKey: `agent:main:${session}`,
        pid: running.child.pid,
        state: "running",
        sandbox: ready["container"],
        workspace: repo,
        // (Cut to 60 characters.)
        doing: expect.stringMatching(/^running exec until \[ -e \/tmp\/gate-watched \]/) as unknown,
      }),
    );

    await openGate(ready["container"], "watched");
    expect(await follow.exited).toBe(0);
    expect(await running.exited).toBe(0);
    // Started while the tool ran, it printed what came after: the result and the final answer.
    expect(follow.stdout()).toContain(`→ exec ${gated("watched")}`);
    expect(follow.stdout()).toContain("exit 0: watched-released");
    expect(follow.stdout()).toContain("watched done");
    expect(follow.stdout()).toContain("ended: completed · 2 turns");

    const after = cordon(["ps", "--json"]);
    expect(await after.exited).toBe(0);
    expect(JSON.parse(after.stdout())).not.toContainEqual(
      expect.objectContaining({ sessionKey: `agent:main:${session}` }),
    );
    const json = cordon(["logs", "--json", "--workspace", repo, "--session", session]);
    expect(await json.exited).toBe(0);
    const records = json
      .stdout()
      .trim()
      .split("\n")
      .map((line) => JSON.parse(line) as Envelope);
    // The same records, with the same seq, as the run's own stream-json (less the deltas).
    const streamed = running.events.filter((event) => !event.type.endsWith("-delta"));
    expect(records.map((r) => [r["seq"], r.type])).toEqual(streamed.map((e) => [e["seq"], e.type]));
  });

  it("logs shows what the agent and its commands wrote, control characters as \\uXXXX, never raw", async () => {
    const session = sessionName("escapes");
    const answer = "done \u001b[2J\u001b]0;owned\u0007\rcordon: forged line";
    const run1 = await run(session, [exec("printf 'out\\033[31mred\\r\\n'"), say(answer)]);
    expect(await run1.exited).toBe(0);

    const logs = cordon(["logs", "--workspace", repo, "--session", session]);
    expect(await logs.exited).toBe(0);
    const shown = logs.stdout();
    expect(shown).toContain("done \\u001b[2J\\u001b]0;owned\\u0007\\u000dcordon: forged line");
    // The result line shows the output as a terminal would, its colour codes removed.
    expect(shown).toContain("exit 0: outred");
    // eslint-disable-next-line no-control-regex
    expect(shown).not.toMatch(/[\u0000-\u0008\u000b-\u001f\u007f]/);
    expect(shown).toContain("ended: completed");
  });
});
