/**
 * Checkpoints and rollback against the real engine (docs/checkpoints.md): a run's turn that
 * creates, deletes and chmods files with a shell command is undone by `cordon rollback --turn -1`;
 * the agent's processes are listed and left, or stopped; the transcript gets a note. And the
 * attacks: hostile names never reach git, a copy whose `.git` or directories point at host paths
 * is rolled back without the host being touched, a busy session or one without a copy is refused.
 */
import { execFile } from "node:child_process";
import { lstat, mkdir, mkdtemp, readFile, readdir, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";

import { afterAll, beforeAll, describe, expect, it } from "vitest";

import {
  ScriptedModelClient,
  createRunner,
  type ModelClient,
  type Runner,
  type RunnerOptions,
} from "../../src/index.js";
import {
  countCheckpointChanges,
  createCheckpoint,
  isMissedTurn,
  listCheckpointEntries,
  noteMissedTurn,
  rollbackToCheckpoint,
} from "../../src/changes/index.js";
import { acquireSessionLock, readSessionEntries } from "../../src/runner/index.js";
import type { SandboxLease } from "../../src/sandbox/index.js";
import { checkpointStoreDir } from "../../src/sandbox/workspace/index.js";
import { demoRepo, git } from "../support/demo-repo.js";
import { removeContainersOfHome, requireSandboxImage } from "../support/docker.js";
import { runCordon } from "../support/run-cli.js";
import { removeStateDirectory } from "../support/state-directory.js";

/** How often the engine paused `container` since `since` (docker events, up to now). */
const pausesSince = async (container: string, since: Date): Promise<number> => {
  const { stdout } = await promisify(execFile)("docker", [
    "events",
    "--since",
    (since.getTime() / 1000).toFixed(3),
    "--until",
    (Date.now() / 1000 + 1).toFixed(3),
    "--filter",
    `container=${container}`,
    "--filter",
    "event=pause",
    "--format",
    "{{.Action}}",
  ]);
  return stdout.split("\n").filter((line) => line === "pause").length;
};

const sessionOf = (name: string): string => `cp-${name}-${process.pid}-${Date.now().toString(36)}`;

/** A model whose one turn runs these shell commands, then answers. */
const modelRunning = (...commands: { command: string; background?: boolean }[]) =>
  new ScriptedModelClient({
    version: 1,
    turns: [
      {
        content: commands.map((input) => ({ type: "tool_use", name: "exec", input })),
      },
      { content: [{ type: "text", text: "done" }] },
    ],
  });

/** A turn that breaks the project with one shell command, leaving a server running; then an answer. */
const breakingModel = (): ScriptedModelClient =>
  modelRunning(
    {
      command:
        "rm -f pricing.py && echo broken > x && mkdir -p made && echo new > made/file.txt && chmod +x test_pricing.py",
    },
    { command: "sleep 600", background: true },
  );

/** A checkpoint's count of changed files as a listing has it (a turn's is counted then). */
async function countedChanges(lease: SandboxLease, name: string): Promise<number | undefined> {
  const recorder = lease.checkpoints;
  if (!recorder) throw new Error("the lease has no checkpoints");
  const entries = await countCheckpointChanges(
    await listCheckpointEntries(lease.privateWorkspace ?? ""),
    (pairs, options) => recorder.compare(pairs, options),
  );
  const found = entries.find((entry) => entry.name === name);
  return found && !isMissedTurn(found) ? found.changedFiles : undefined;
}

describe("checkpoints and rollback", () => {
  let home: string;
  let repo: string;
  let env: NodeJS.ProcessEnv;
  const runnerOf = (extra: Partial<RunnerOptions> = {}): Runner =>
    createRunner({ cwd: repo, workspace: repo, env, onClose: "keep", ...extra });
  const cordon = (command: string, ...args: string[]) =>
    runCordon([command, "--workspace", repo, ...args], { ...env, CORDON_LOG_LEVEL: "silent" });
  /** Runs `command` in the session's sandbox, as the agent would. */
  const inSandbox = async (runner: Runner, sessionKey: string, command: string) => {
    const held = await runner.acquireSandbox({ sessionKey });
    try {
      return await held.lease.sandbox.exec(command);
    } finally {
      await held.lease.release();
    }
  };

  beforeAll(async () => {
    await requireSandboxImage();
    home = await mkdtemp(path.join(tmpdir(), "cordon-checkpoints-home-"));
    repo = await demoRepo();
    env = { ...process.env, CORDON_HOME: home, CORDON_CONFIG: "", ANTHROPIC_API_KEY: "" };
  });

  afterAll(async () => {
    await removeContainersOfHome(home);
    await removeStateDirectory(home);
    await rm(path.dirname(repo), { recursive: true, force: true });
  });

  it("`rollback --turn -1` undoes a shell command's creations, deletions and chmods, lists the server it left, and tells the transcript", async () => {
    const sessionKey = sessionOf("turn");
    await using runner = runnerOf({ model: breakingModel() });
    const events: string[] = [];
    const result = await runner.run({
      prompt: "break it",
      sessionKey,
      onEvent: (event) => {
        if (event.type === "checkpoint") events.push(JSON.stringify(event));
      },
    });
    expect(result.exitCode, JSON.stringify(result)).toBe(0);
    expect(events).toHaveLength(1);
    // A turn's record lists no changes (half its work); a listing counts them.
    expect(JSON.parse(events[0] ?? "{}")).toMatchObject({ name: "turn-1" });
    expect(JSON.parse(events[0] ?? "{}")).not.toHaveProperty("changedFiles");
    const broken = await inSandbox(runner, sessionKey, "ls; stat -c %a test_pricing.py");
    expect(broken.stdout).toMatch(/made\n/);
    expect(broken.stdout).not.toMatch(/^pricing\.py$/m);
    expect(broken.stdout).toMatch(/755\n$/);

    const listed = await cordon("checkpoints", "--session", sessionKey);
    expect(listed.exitCode, listed.stderr).toBe(0);
    expect(listed.stdout).toMatch(/^turn-1 .* before turn 1 of /m);
    // Counted by the listing: the state before turn 1 is the seeded copy.
    expect(listed.stdout).toMatch(/^turn-1 +\S+ +0 +before turn 1/m);

    const rolled = await cordon("rollback", "--turn", "-1", "--session", sessionKey, "--json");
    expect(rolled.exitCode, rolled.stderr).toBe(0);
    const outcome = JSON.parse(rolled.stdout) as {
      restored: { name: string };
      saved: { name: string };
      changed: { path: string; deleted: boolean }[];
      processesLeft: string[];
    };
    expect(outcome.restored.name).toBe("turn-1");
    expect(outcome.saved.name).toBe("before-rollback-1");
    expect(outcome.changed.map((entry) => entry.path).sort()).toEqual([
      "made/file.txt",
      "pricing.py",
      "test_pricing.py",
      "x",
    ]);
    expect(outcome.processesLeft.some((line) => line.includes("sleep 600"))).toBe(true);

    const after = await inSandbox(
      runner,
      sessionKey,
      "ls -A; stat -c %a test_pricing.py; cat pricing.py | head -1",
    );
    expect(after.stdout.split("\n").slice(0, 5)).toEqual([
      ".git",
      "AGENTS.md",
      "README.md",
      "pricing.py",
      "test_pricing.py",
    ]);
    expect(after.stdout).toMatch(/\n644\n/);
    expect(after.stdout).toContain(
      (await readFile(path.join(repo, "pricing.py"), "utf8")).split("\n")[0],
    );
    // Nothing left to review: the copy is as seeded.
    const diff = await cordon("diff", "--session", sessionKey);
    expect(diff.stdout).toBe("");

    // The agent's next turn reads what happened.
    const plan = await runner.plan({ sessionKey });
    const entries = await readSessionEntries({
      stateDir: home,
      sessionKey: plan.sessionKey,
      project: plan.agent.workspaceId,
    });
    const note = JSON.stringify(entries.at(-1));
    expect(note).toContain("rolled /workspace back to checkpoint turn-1");
    expect(note).toContain("sleep 600");

    // The rollback is undone by rolling back to the state it saved; --stop-processes ends the server.
    const undo = await cordon(
      "rollback",
      "before-rollback-1",
      "--stop-processes",
      "--session",
      sessionKey,
    );
    expect(undo.exitCode, undo.stderr).toBe(0);
    const redone = await inSandbox(runner, sessionKey, "cat x; ps -eo args");
    expect(redone.stdout).toMatch(/^broken\n/);
    expect(redone.stdout).not.toContain("sleep 600");
  }, 240_000);

  it("a turn's checkpoint is the copy as the turn before left it: what a process left running writes while the model answers is undone with the next turn", async () => {
    const sessionKey = sessionOf("overlap");
    await using planner = runnerOf();
    const copy = (await planner.plan({ sessionKey })).sandbox.spec?.privateWorkspace ?? "";
    const script = new ScriptedModelClient({
      version: 1,
      turns: [
        {
          content: [
            {
              type: "tool_use",
              name: "exec",
              input: { command: "sleep 5 && echo late > late.txt", background: true },
            },
          ],
        },
        { content: [{ type: "tool_use", name: "exec", input: { command: "echo two > two.txt" } }] },
        { content: [{ type: "text", text: "done" }] },
      ],
    });
    // The second answer comes only once the process turn 1 left has written: its write falls
    // in the model's answer, after the state turn 1's tools left was recorded.
    let answers = 0;
    const model: ModelClient = {
      provider: "scripted",
      async *stream(request) {
        answers += 1;
        if (answers === 2) {
          for (let polls = 0; polls < 1200; polls += 1) {
            if (
              await stat(path.join(copy, "late.txt")).then(
                () => true,
                () => false,
              )
            )
              break;
            await new Promise((resolve) => setTimeout(resolve, 100));
          }
        }
        yield* script.stream(request);
      },
    };
    await using runner = runnerOf({ model });
    const result = await runner.run({ prompt: "write late", sessionKey });
    expect(result.exitCode, JSON.stringify(result)).toBe(0);
    expect((await inSandbox(runner, sessionKey, "cat late.txt two.txt")).stdout).toBe(
      "late\ntwo\n",
    );

    const outcome = await runner.rollback({ sessionKey, to: { turn: -1 } });
    expect(outcome.restored.name).toBe("turn-2");
    // Both gone: two.txt was turn 2's, late.txt was written after turn 1's tools had ended.
    expect([...outcome.changed.keys()].sort()).toEqual(["late.txt", "two.txt"]);
    const after = await inSandbox(runner, sessionKey, "ls late.txt two.txt 2>&1 || true");
    expect(after.stdout).toMatch(/late\.txt'?: No such file/);
    expect(after.stdout).toMatch(/two\.txt'?: No such file/);
  }, 240_000);

  it("a turn that makes its work unreadable to its own user (chmod 000) is undone all the same; diff says which paths and how to fix it", async () => {
    const sessionKey = sessionOf("unreadable");
    const lockingModel = modelRunning({
      command:
        "echo changed >> pricing.py && chmod 000 pricing.py test_pricing.py && mkdir -p locked/deep && echo s > locked/deep/f && chmod 000 locked/deep locked",
    });
    await using runner = runnerOf({ model: lockingModel });
    const result = await runner.run({ prompt: "lock it", sessionKey });
    expect(result.exitCode, JSON.stringify(result)).toBe(0);

    // git in the inspector cannot read them: the error names them and the way out.
    const diff = await cordon("diff", "--session", sessionKey);
    expect(diff.exitCode).not.toBe(0);
    expect(diff.stderr).toMatch(/the sandbox user cannot read .*\bpricing\.py\b/);
    expect(diff.stderr).toMatch(/chmod -R u\+rwX .*cordon rollback --session S --turn -1/s);

    const rolled = await cordon("rollback", "--turn", "-1", "--session", sessionKey, "--json");
    expect(rolled.exitCode, rolled.stderr).toBe(0);
    const outcome = JSON.parse(rolled.stdout) as { changed: { path: string }[] };
    expect(outcome.changed.map((entry) => entry.path).sort()).toEqual([
      "locked/deep/f",
      "pricing.py",
    ]);
    const after = await inSandbox(
      runner,
      sessionKey,
      "ls -A; stat -c '%a %n' pricing.py test_pricing.py; cat pricing.py",
    );
    expect(after.stdout).not.toMatch(/^locked$/m);
    expect(after.stdout).toContain("644 pricing.py\n644 test_pricing.py\n");
    expect(after.stdout).not.toContain("changed");
    expect(after.stdout).toContain(await readFile(path.join(repo, "pricing.py"), "utf8"));
    const clean = await cordon("diff", "--session", sessionKey);
    expect(clean.exitCode, clean.stderr).toBe(0);
    expect(clean.stdout).toBe("");
  }, 240_000);

  it("a named checkpoint comes back after edits, deletions and a new directory; names that are paths, options or refs are refused before anything runs", async () => {
    const sessionKey = sessionOf("named");
    await using runner = runnerOf({ model: breakingModel() });
    await inSandbox(runner, sessionKey, "echo v1 > notes.txt");
    const taken = await cordon("checkpoint", "good-1", "--session", sessionKey);
    expect(taken.exitCode, taken.stderr).toBe(0);
    expect(taken.stdout).toBe("good-1\n");
    expect(taken.stderr).toMatch(/1 file\(s\) changed/);

    for (const hostile of [
      "../escape",
      "--upload-pack=touch /tmp/cordon-pwned",
      "with space",
      "refs/heads/main",
      "-x",
      "a..b",
    ]) {
      // After `--`, so the name reaches cordon's own check rather than commander's option parsing.
      const refused = await cordon("checkpoint", "--session", sessionKey, "--", hostile);
      expect(refused.exitCode, hostile).toBe(2);
      expect(refused.stderr).toMatch(/cannot name a checkpoint/);
      const unknown = await cordon("rollback", "--session", sessionKey, "--", hostile);
      expect(unknown.exitCode, hostile).toBe(2);
      expect(unknown.stderr).toMatch(/no checkpoint named/);
    }
    await expect(lstat("/tmp/cordon-pwned")).rejects.toThrow(/ENOENT/);
    const duplicate = await cordon("checkpoint", "good-1", "--session", sessionKey);
    expect(duplicate.exitCode).toBe(2);
    expect(duplicate.stderr).toMatch(/exists already/);

    await inSandbox(
      runner,
      sessionKey,
      "echo v2 > notes.txt && rm README.md && mkdir -p deep/er && echo z > deep/er/z",
    );
    const back = await runner.rollback({ sessionKey, to: { name: "good-1" } });
    expect([...back.changed.keys()].sort()).toEqual(["README.md", "deep/er/z", "notes.txt"]);
    const now = await inSandbox(runner, sessionKey, "cat notes.txt; ls README.md; ls -d deep/er/z");
    expect(now.stdout).toMatch(/^v1\nREADME\.md\n/);
    expect(now.exitCode).not.toBe(0);
    const names = (await runner.checkpoints({ sessionKey })).map((checkpoint) => checkpoint.name);
    expect(names).toEqual(["good-1", "before-rollback-1"]);
  }, 240_000);

  it("a record sees every change: one that keeps size and mtime, in the same second, and one put back", async () => {
    const sessionKey = sessionOf("index");
    await using runner = runnerOf({ model: breakingModel() });
    await inSandbox(runner, sessionKey, "printf 'price = 1\\n' > pricing.py");
    const first = await runner.checkpoint({ sessionKey, name: "index-1" });
    expect(first.changedFiles).toBe(1);

    // A file rewritten in place with its size, and its mtime put back: only the ctime (which no
    // process can set) says it changed, and git compares ctimes in whole seconds — a stat cache
    // kept between records missed this when both fell in one second (seen in CI). Every record
    // hashes the copy, so it cannot.
    await inSandbox(
      runner,
      sessionKey,
      "touch -r README.md /tmp/when && tr a-y b-z < README.md > /tmp/readme && cat /tmp/readme > README.md && touch -r /tmp/when README.md",
    );
    const second = await runner.checkpoint({ sessionKey, name: "index-2" });
    expect(second.changedFiles).toBe(1);
    expect(second.tree).not.toBe(first.tree);

    // Back to the repository's content: recorded as the repository's again.
    await inSandbox(runner, sessionKey, "git show HEAD:pricing.py > pricing.py");
    const third = await runner.checkpoint({ sessionKey, name: "index-3" });
    expect(third.changedFiles).toBe(1);
  }, 240_000);

  it("a turn's checkpoint pauses the sandbox only while something runs in it, and a writer left running is recorded as one state", async () => {
    const sessionKey = sessionOf("pause");
    await using runner = runnerOf({ model: breakingModel() });
    const held = await runner.acquireSandbox({ sessionKey });
    const { lease } = held;
    try {
      // A name with a line break in it counts once: the listing's count cannot be inflated.
      await lease.sandbox.exec(
        "echo 1 > a.txt && echo 1 > b.txt && echo 1 > \"$(printf 'c\\nd')\"",
      );
      await lease.checkpoints?.prepare?.();
      const idleSince = new Date();
      const idle = await createCheckpoint(lease, { kind: "turn", sessionKey });
      expect(await countedChanges(lease, idle.name)).toBe(3);
      expect(await pausesSince(lease.sandbox.id, idleSince)).toBe(0);

      // Left running by an earlier turn: writes a.txt, then b.txt, with one counter, for ever.
      const writer = await lease.sandbox.processes.start(
        "i=1; while :; do i=$((i+1)); echo $i > a.txt.new && mv a.txt.new a.txt; echo $i > b.txt.new && mv b.txt.new b.txt; done",
      );
      try {
        for (let tries = 0; tries < 200; tries += 1) {
          if ((await lease.sandbox.exec("cat b.txt")).stdout.trim() !== "1") break;
          await new Promise((resolve) => setTimeout(resolve, 50));
        }
        await lease.checkpoints?.prepare?.();
        const busySince = new Date();
        const busy = await createCheckpoint(lease, { kind: "turn", sessionKey });
        expect(await pausesSince(lease.sandbox.id, busySince)).toBeGreaterThanOrEqual(1);
        await lease.sandbox.processes.kill(writer.id);
        // Put back: a and b from one moment, so equal or a one ahead (caught between its two writes).
        await rollbackToCheckpoint(lease, { name: busy.name });
        const [a, b] = (await lease.sandbox.exec("cat a.txt b.txt")).stdout.trim().split("\n");
        expect(Number(a) - Number(b), `a.txt ${a}, b.txt ${b}`).toBeGreaterThanOrEqual(0);
        expect(Number(a) - Number(b), `a.txt ${a}, b.txt ${b}`).toBeLessThanOrEqual(1);
        expect(Number(b)).toBeGreaterThan(1);
      } finally {
        await lease.sandbox.processes.kill(writer.id).catch(() => undefined);
      }
    } finally {
      await lease.release();
    }
  }, 240_000);

  // A turn's record is recorder.c's (its cache: record-cache), or git's when the recorder leaves
  // it to git (its kept index: index), as it does for a copy holding a nested repository.
  it.each([
    { by: "the recorder, from its cache", cache: "record-cache", copy: undefined },
    {
      by: "git, from the kept index (a copy with a nested repository)",
      cache: "index",
      copy: "mkdir -p vendor/lib/.git",
    },
  ])(
    "a turn's record by $by sees a file rewritten in the second that cache was made, its size and mtime put back",
    async ({ cache, copy }) => {
      const sessionKey = sessionOf("kept");
      await using runner = runnerOf({ model: breakingModel() });
      const held = await runner.acquireSandbox({ sessionKey });
      const { lease } = held;
      const kept = path.join(checkpointStoreDir(lease.privateWorkspace ?? ""), cache);
      const turn = () => createCheckpoint(lease, { kind: "turn", sessionKey });
      try {
        if (copy) await lease.sandbox.exec(copy);
        // Only ctime (which no process sets) tells README.md's rewrites apart, and git compares it
        // in whole seconds: a kept index holding README.md's entry from the second of the rewrite
        // would miss it (the recorder compares nanoseconds, and keeps the same rule). The race
        // needs both rewrites in one second, so it is tried until it lands.
        let landed = 0;
        for (let attempt = 0; attempt < 12 && landed < 2; attempt += 1) {
          await rm(kept, { force: true });
          await lease.checkpoints?.prepare?.();
          // At the start of a second: README.md rewritten with its own content (so the kept index
          // keeps its entry unless told not to), an old mtime put on it.
          const first = await lease.sandbox.exec(
            'while [ "$(date +%N)" -gt 150000000 ]; do :; done; cp README.md /tmp/same && cat /tmp/same > README.md && touch -d @1500000000 README.md && stat -c %Z README.md',
          );
          const made = await turn();
          expect((await lstat(kept)).isFile(), `an idle turn makes ${cache}`).toBe(true);
          const second = await lease.sandbox.exec(
            "tr a-y b-z < /tmp/same > /tmp/other && cat /tmp/other > README.md && touch -d @1500000000 README.md && stat -c %Z README.md",
          );
          const after = await turn();
          expect(after.tree, `attempt ${attempt}`).not.toBe(made.tree);
          expect(await countedChanges(lease, after.name)).toBe(1);
          if (first.stdout.trim() === second.stdout.trim()) landed += 1;
          await lease.sandbox.exec("cat /tmp/same > README.md");
        }
        expect(landed, "no attempt rewrote README.md twice within one second").toBeGreaterThan(0);
      } finally {
        await lease.release();
      }
    },
    400_000,
  );

  it("a spare's recorder, started ahead of its record, reads the copy only when the record is asked, and leaves nothing when unused", async () => {
    const sessionKey = sessionOf("ahead");
    await using runner = runnerOf({ model: breakingModel() });
    const held = await runner.acquireSandbox({ sessionKey });
    const { lease } = held;
    const turn = () => createCheckpoint(lease, { kind: "turn", sessionKey });
    /** This file's inspector containers, running or not. */
    const inspectors = async (): Promise<string[]> => {
      const { stdout } = await promisify(execFile)("docker", [
        "ps",
        "-a",
        "--filter",
        "label=cordon.inspector",
        "--format",
        '{{.Names}} {{.Label "cordon.home"}}',
      ]);
      return stdout.split("\n").filter((line) => line.includes(` ${home}`));
    };
    try {
      await turn();
      // The spare's recorder starts now, beside the copy as it is: what is written and removed
      // after it started is in the record all the same.
      await lease.checkpoints?.prepare?.();
      await lease.sandbox.exec("echo later > written-after-the-spare.txt && rm README.md");
      const after = await turn();
      expect(await countedChanges(lease, after.name)).toBe(2);
      const back = await rollbackToCheckpoint(lease, { name: after.name });
      expect(back.changed.size).toBe(0);
      await lease.checkpoints?.prepare?.();
      expect(await inspectors()).not.toEqual([]);
    } finally {
      await lease.release();
    }
    // The spare waited unused: its recorder read end-of-file, and its container is gone.
    await expect.poll(inspectors, { timeout: 60_000, interval: 500 }).toEqual([]);
  }, 300_000);

  it("a kept index made within a second of most of the copy being written is made again by the next idle turn", async () => {
    const sessionKey = sessionOf("partial");
    await using runner = runnerOf({ model: breakingModel() });
    const held = await runner.acquireSandbox({ sessionKey });
    const { lease } = held;
    // git records this copy (the recorder leaves a nested repository to it), so it keeps its index.
    await lease.sandbox.exec("mkdir -p vendor/lib/.git");
    const store = checkpointStoreDir(lease.privateWorkspace ?? "");
    const exists = (file: string) =>
      lstat(path.join(store, file)).then(
        () => true,
        () => false,
      );
    const turn = () => createCheckpoint(lease, { kind: "turn", sessionKey });
    try {
      // Every file rewritten just before the record, as a fresh seed is: its kept index holds
      // almost no stat data. Whether the record lands within that second depends on the load,
      // so it is tried until it does.
      let partial = false;
      for (let attempt = 0; attempt < 10 && !partial; attempt += 1) {
        await rm(path.join(store, "index"), { force: true });
        await lease.checkpoints?.prepare?.();
        await lease.sandbox.exec(
          'find . -path ./.git -prune -o -type f -exec sh -c \'cat "$1" > /tmp/f && cat /tmp/f > "$1"\' _ {} \\;',
        );
        await turn();
        partial = await exists("index-partial");
      }
      expect(partial, "no record landed within a second of the rewrite").toBe(true);
      // A second later, idle: the index is made again from the partial one, whole this time.
      await lease.sandbox.exec("sleep 2");
      await lease.checkpoints?.prepare?.();
      const later = await turn();
      expect(await countedChanges(lease, later.name)).toBe(0);
      expect(await exists("index")).toBe(true);
      expect(await exists("index-partial")).toBe(false);
    } finally {
      await lease.release();
    }
  }, 400_000);

  it("a copy whose directories and .git point at host paths is rolled back without the host being touched", async () => {
    const sessionKey = sessionOf("hostile");
    const victim = await mkdtemp(path.join(tmpdir(), "cordon-checkpoint-victim-"));
    await writeFile(path.join(victim, "keep.txt"), "host data\n");
    await mkdir(path.join(victim, "sub"));
    const headBefore = git(repo, "rev-parse", "HEAD");
    try {
      await using runner = runnerOf({ model: breakingModel() });
      await inSandbox(runner, sessionKey, "mkdir -p lib && echo code > lib/a.py");
      expect((await runner.checkpoint({ sessionKey, name: "clean" })).changedFiles).toBe(1);
      // The agent puts links where directories and files were, names the host's paths in a
      // nested `.git` file and swaps the copy's own `.git` for a file pointing at the real repo.
      await inSandbox(
        runner,
        sessionKey,
        [
          `rm -rf lib && ln -s ${victim} lib`,
          `rm -f AGENTS.md && ln -s ${victim}/keep.txt AGENTS.md`,
          `mkdir -p nested && printf 'gitdir: ${repo}/.git\\n' > nested/.git && echo n > nested/n`,
          `mv .git .git-moved && printf 'gitdir: ${repo}/.git\\n' > .git`,
        ].join(" && "),
      );
      const back = await runner.rollback({ sessionKey, to: { name: "clean" } });
      expect([...back.changed.keys()]).toEqual(expect.arrayContaining(["AGENTS.md", "lib/a.py"]));
      const now = await inSandbox(
        runner,
        sessionKey,
        "cat lib/a.py; test -L lib || echo lib-is-dir; test -L AGENTS.md || head -1 AGENTS.md",
      );
      expect(now.stdout).toMatch(/^code\nlib-is-dir\n/);
      // The host's files are as they were: nothing was written through a link.
      expect(await readdir(victim)).toEqual(["keep.txt", "sub"]);
      expect(await readdir(path.join(victim, "sub"))).toEqual([]);
      expect(await readFile(path.join(victim, "keep.txt"), "utf8")).toBe("host data\n");
      expect(git(repo, "rev-parse", "HEAD")).toBe(headBefore);
      expect(git(repo, "status", "--porcelain")).toBe("");
    } finally {
      await rm(victim, { recursive: true, force: true });
    }
  }, 240_000);

  it("`checkpoints` lists a turn whose record failed as missed (and in --json), the turn `rollback --turn -1` refuses", async () => {
    const sessionKey = sessionOf("missed");
    await using runner = runnerOf();
    const held = await runner.acquireSandbox({ sessionKey });
    try {
      await createCheckpoint(held.lease, { kind: "turn", sessionKey });
      await noteMissedTurn(held.lease, { sessionKey, reason: "the inspector did not start" });
    } finally {
      await held.lease.release();
    }
    const listed = await cordon("checkpoints", "--session", sessionKey);
    expect(listed.exitCode, listed.stderr).toBe(0);
    expect(listed.stdout).toMatch(/^turn-1 .* 0 +before turn 1 of /m);
    expect(listed.stdout).toMatch(
      /^turn-2 .* missed +before turn 2 of .*: not recorded \(the inspector did not start\), so no rollback returns here$/m,
    );
    const json = await cordon("checkpoints", "--session", sessionKey, "--json");
    expect(json.exitCode, json.stderr).toBe(0);
    const entries = JSON.parse(json.stdout) as { name: string; tree?: string; missed?: string }[];
    expect(entries.map((entry) => [entry.name, entry.missed ?? null])).toEqual([
      ["turn-1", null],
      ["turn-2", "the inspector did not start"],
    ]);
    expect(entries[1]).not.toHaveProperty("tree");
    // The listing counts turn-1's changes through the engine; one that does not answer leaves the
    // count out (`?`, and why on stderr), never the list.
    const unanswered = await runCordon(
      ["checkpoints", "--workspace", repo, "--session", sessionKey],
      {
        ...env,
        CORDON_LOG_LEVEL: "silent",
        DOCKER_HOST: `unix://${path.join(home, "no-engine.sock")}`,
      },
    );
    expect(unanswered.exitCode, unanswered.stderr).toBe(0);
    expect(unanswered.stdout).toMatch(/^turn-1 +\S+ +\? +before turn 1/m);
    expect(unanswered.stderr).toMatch(
      /^\? = not counted: .*that failed: cannot reach the Docker engine at unix:\/\/.*no-engine\.sock/m,
    );
    const rolled = await cordon("rollback", "--turn", "-1", "--session", sessionKey);
    expect(rolled.exitCode).toBe(2);
    expect(rolled.stderr).toMatch(/turn-2 has no checkpoint: recording it failed/);
  });

  it("refuses a busy session (exit 3, naming the run) and a session without a private copy (exit 2, with the fix)", async () => {
    const sessionKey = sessionOf("busy");
    await using runner = runnerOf({ model: breakingModel() });
    await inSandbox(runner, sessionKey, "true");
    await runner.checkpoint({ sessionKey, name: "here" });
    const plan = await runner.plan({ sessionKey });
    const lock = await acquireSessionLock({
      stateDir: home,
      sessionKey: plan.sessionKey,
      project: plan.agent.workspaceId,
      runId: "run-that-holds-it",
    });
    try {
      const busy = await cordon("rollback", "here", "--session", sessionKey);
      expect(busy.exitCode).toBe(3);
      expect(busy.stderr).toMatch(/cannot roll back session .* held by the run of session/);
      expect(busy.stderr).toMatch(/run-that-holds-it/);
    } finally {
      await lock.release();
    }

    const never = await cordon("checkpoints", "--session", sessionOf("never-ran"));
    expect(never.exitCode).toBe(2);
    expect(never.stderr).toMatch(/has no private copy/);
    expect(never.stderr).toMatch(/cordon sessions list/);

    const config = path.join(home, "rw.json5");
    await writeFile(config, '{ agents: { defaults: { sandbox: { workspaceAccess: "rw" } } } }\n');
    const rw = await runCordon(
      [
        "rollback",
        "--turn",
        "-1",
        "--workspace",
        repo,
        "--config",
        config,
        "--session",
        sessionKey,
      ],
      { ...env, CORDON_LOG_LEVEL: "silent" },
    );
    expect(rw.exitCode).toBe(2);
    expect(rw.stderr).toMatch(/does not work on a seeded private copy/);
    expect(rw.stderr).toMatch(/workspaceAccess "none"/);
  }, 240_000);
});
