import { mkdir, mkdtemp, rm, writeFile, appendFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";

import { afterEach, beforeEach, describe, expect, it } from "vitest";

import { ConfigError } from "../common/index.js";
import { baselineGitDir, baselineRef, type WorkspaceCheckpoints } from "../sandbox/index.js";
import {
  assertCheckpointName,
  checkpointListFile,
  countCheckpointChanges,
  createCheckpoint,
  findCheckpoint,
  isMissedTurn,
  listCheckpointEntries,
  listCheckpoints,
  noteMissedTurn,
  rollbackToCheckpoint,
  type Checkpoint,
} from "./checkpoints.js";

const tree = (digit: string): string => digit.repeat(40);

/** A recorder that hands out trees in order and records what it was asked. */
function fakeRecorder(trees: string[]): WorkspaceCheckpoints & { calls: string[] } {
  const calls: string[] = [];
  return {
    calls,
    record: (options = {}) => {
      calls.push(
        options.changes === false ? "record uncounted" : `record since ${options.since ?? "-"}`,
      );
      return Promise.resolve({
        tree: trees.shift() ?? tree("f"),
        changed: options.changes === false ? undefined : new Map([["a.txt", "100644 x"]]),
      });
    },
    compare: (pairs) => {
      calls.push(...pairs.map(([from, to]) => `compare ${from ?? "-"} ${to}`));
      // A tree "e…" is gone from the store: uncountable.
      return Promise.resolve(pairs.map(([, to]) => (to === tree("e") ? undefined : 2)));
    },
    restore: (target) => {
      calls.push(`restore ${target}`);
      return Promise.resolve({
        tree: trees.shift() ?? tree("f"),
        changed: new Map([
          ["a.txt", "deleted"],
          ["b.txt", "100755 y"],
        ]),
      });
    },
  };
}

const entry = (name: string, extra: Partial<Checkpoint> = {}): Checkpoint => ({
  v: 1,
  name,
  tree: tree("a"),
  at: "2026-11-27T00:00:00.000Z",
  kind: "named",
  changedFiles: 0,
  ...extra,
});

describe("checkpoint names", () => {
  it.each(["before-refactor", "try_2", "v1.2", "A"])("takes %s", (name) => {
    expect(() => assertCheckpointName(name)).not.toThrow();
  });
  it.each([
    "../x",
    "--upload-pack=touch /tmp/x",
    "-x",
    "with space",
    "refs/heads/main",
    "a..b",
    "",
    ".hidden",
    "x".repeat(65),
    "tab\there",
    "new\nline",
  ])("refuses %j with a usage error naming the rule", (name) => {
    expect(() => assertCheckpointName(name)).toThrow(ConfigError);
    expect(() => assertCheckpointName(name)).toThrow(/letters, digits/);
  });
});

describe("the checkpoint list", () => {
  let root: string;
  let copy: string;
  beforeEach(async () => {
    root = await mkdtemp(path.join(tmpdir(), "cordon-checkpoints-"));
    copy = path.join(root, "copy");
    await mkdir(path.join(baselineGitDir(copy), "refs", "cordon"), { recursive: true });
    await writeFile(path.join(baselineGitDir(copy), baselineRef), `${tree("0")}\n`);
  });
  afterEach(async () => {
    await rm(root, { recursive: true, force: true });
  });

  it("numbers unnamed checkpoints, counts from the last one, and refuses a taken name", async () => {
    const recorder = fakeRecorder([tree("1"), tree("2"), tree("3")]);
    const source = { privateWorkspace: copy, checkpoints: recorder };
    expect((await createCheckpoint(source)).name).toBe("cp-1");
    const second = await createCheckpoint(source, { kind: "turn", sessionKey: "agent:main:s" });
    // A turn's is recorded uncounted: a listing counts it (below).
    expect(second).toMatchObject({ name: "turn-1", turn: 1, kind: "turn" });
    expect(second.changedFiles).toBeUndefined();
    await expect(createCheckpoint(source, { name: "cp-1" })).rejects.toThrow(/exists already/);
    expect((await createCheckpoint(source, { name: "mine" })).tree).toBe(tree("3"));
    expect(recorder.calls).toEqual([
      "record since -",
      "record uncounted",
      `record since ${tree("2")}`,
    ]);
    expect((await listCheckpoints(copy)).map((checkpoint) => checkpoint.name)).toEqual([
      "cp-1",
      "turn-1",
      "mine",
    ]);
  });

  it("counts the turns' changes when listed, each against the checkpoint before it, a missed turn skipped", async () => {
    const recorder = fakeRecorder([tree("1"), tree("2"), tree("e"), tree("4")]);
    const source = { privateWorkspace: copy, checkpoints: recorder };
    const sessionKey = "agent:main:s";
    await createCheckpoint(source, { kind: "turn", sessionKey });
    await noteMissedTurn(source, { sessionKey, reason: "the inspector did not start" });
    await createCheckpoint(source, { kind: "turn", sessionKey });
    await createCheckpoint(source, { name: "mine" });
    await createCheckpoint(source, { kind: "turn", sessionKey });
    recorder.calls.length = 0;
    const compare: WorkspaceCheckpoints["compare"] = (pairs, options) =>
      recorder.compare(pairs, options);
    const counted = await countCheckpointChanges(await listCheckpointEntries(copy), compare);
    // One call for the three uncounted turns; "mine" was counted when taken.
    expect(recorder.calls).toEqual([
      `compare - ${tree("1")}`,
      `compare ${tree("1")} ${tree("2")}`,
      `compare ${tree("e")} ${tree("4")}`,
    ]);
    expect(counted.map((entry) => (isMissedTurn(entry) ? "missed" : entry.changedFiles))).toEqual([
      2,
      "missed",
      2,
      1,
      2,
    ]);
    // A tree gone from the store stays uncounted; nothing to count asks nothing.
    const gone = await countCheckpointChanges(
      [entry("gone", { kind: "turn", tree: tree("e"), changedFiles: undefined })],
      compare,
    );
    expect((gone[0] as Checkpoint).changedFiles).toBeUndefined();
    recorder.calls.length = 0;
    await countCheckpointChanges(counted, compare);
    expect(recorder.calls).toEqual([]);
  });

  it("lists a turn whose record failed among the entries, in its place, never among the checkpoints", async () => {
    const source = { privateWorkspace: copy, checkpoints: fakeRecorder([tree("1"), tree("3")]) };
    const sessionKey = "agent:main:s";
    await createCheckpoint(source, { kind: "turn", sessionKey });
    await noteMissedTurn(source, { sessionKey, reason: "the inspector did not start" });
    await createCheckpoint(source, { kind: "turn", sessionKey });
    const entries = await listCheckpointEntries(copy);
    expect(entries.map((entry) => [entry.name, isMissedTurn(entry)])).toEqual([
      ["turn-1", false],
      ["turn-2", true],
      ["turn-3", false],
    ]);
    expect(entries[1]).toMatchObject({
      turn: 2,
      sessionKey,
      missed: "the inspector did not start",
    });
    expect(entries[1]).not.toHaveProperty("tree");
    expect((await listCheckpoints(copy)).map((checkpoint) => checkpoint.name)).toEqual([
      "turn-1",
      "turn-3",
    ]);
  });

  it("skips a torn or foreign line, and never reads through a link", async () => {
    const file = checkpointListFile(copy);
    await appendFile(file, `${JSON.stringify(entry("ok"))}\n{"v":1,"name":"../x"\n`);
    await appendFile(file, `${JSON.stringify(entry("bad", { tree: "--upload-pack=x" }))}\n`);
    expect((await listCheckpoints(copy)).map((checkpoint) => checkpoint.name)).toEqual(["ok"]);
    await rm(file);
    await writeFile(path.join(root, "elsewhere"), `${JSON.stringify(entry("planted"))}\n`);
    const { symlink } = await import("node:fs/promises");
    await symlink(path.join(root, "elsewhere"), file);
    await expect(listCheckpoints(copy)).rejects.toThrow(/ELOOP/);
  });

  it("reads again what another writer appended, tore or replaced since this process read it", async () => {
    const file = checkpointListFile(copy);
    const names = async () => (await listCheckpoints(copy)).map((checkpoint) => checkpoint.name);
    await appendFile(file, `${JSON.stringify(entry("a"))}\n`);
    expect(await names()).toEqual(["a"]);
    // Another process's append, then a torn write (no newline yet), then one after it.
    await appendFile(file, `${JSON.stringify(entry("b"))}\n{"v":1,"name":"c"`);
    expect(await names()).toEqual(["a", "b"]);
    await appendFile(file, `${JSON.stringify(entry("d"))}\n`);
    expect(await names()).toEqual(["a", "b"]);
    await appendFile(file, `${JSON.stringify(entry("e"))}\n`);
    expect(await names()).toEqual(["a", "b", "e"]);
    // Rewritten in place (the same inode), longer than before: read whole, not as grown.
    const rewritten = ["p", "q", "r", "s", "t"].map((name) => JSON.stringify(entry(name)));
    await writeFile(file, `${rewritten.join("\n")}\n`);
    expect(await names()).toEqual(["p", "q", "r", "s", "t"]);
    // A new file in its place, shorter: read whole.
    await rm(file);
    await writeFile(file, `${JSON.stringify(entry("z"))}\n`);
    expect(await names()).toEqual(["z"]);
    await rm(file);
    expect(await names()).toEqual([]);
  });

  it("sees its own appends and another writer's after them, in the order written", async () => {
    const source = { privateWorkspace: copy, checkpoints: fakeRecorder([tree("1"), tree("2")]) };
    const names = async () => (await listCheckpoints(copy)).map((checkpoint) => checkpoint.name);
    await createCheckpoint(source, { name: "mine" });
    expect(await names()).toEqual(["mine"]);
    await appendFile(checkpointListFile(copy), `${JSON.stringify(entry("theirs"))}\n`);
    await createCheckpoint(source, { kind: "turn" });
    expect(await names()).toEqual(["mine", "theirs", "turn-1"]);
    await appendFile(checkpointListFile(copy), `${JSON.stringify(entry("later"))}\n`);
    expect(await names()).toEqual(["mine", "theirs", "turn-1", "later"]);
  });

  it("rolls back to a checkpoint and keeps the state it replaced as before-rollback-<n>", async () => {
    const recorder = fakeRecorder([tree("1"), tree("9")]);
    const source = { privateWorkspace: copy, checkpoints: recorder };
    await createCheckpoint(source, { name: "start" });
    const outcome = await rollbackToCheckpoint(source, { name: "start" }, { sessionKey: "s" });
    expect(recorder.calls.at(-1)).toBe(`restore ${tree("1")}`);
    expect(outcome.saved).toMatchObject({ name: "before-rollback-1", tree: tree("9") });
    expect(outcome.saved.changedFiles).toBe(2);
    await expect(rollbackToCheckpoint(source, { name: "nope" })).rejects.toThrow(
      /no checkpoint named "nope"[\s\S]*/,
    );
  });

  it("says why a copy without a recorder has no checkpoints", async () => {
    await expect(createCheckpoint({ privateWorkspace: undefined })).rejects.toThrow(
      /no private workspace/,
    );
    await expect(createCheckpoint({ privateWorkspace: copy })).rejects.toThrow(
      /cannot record or restore/,
    );
  });
});

/** The fix a usage error names. */
function fixOf(fn: () => unknown): string {
  try {
    fn();
  } catch (error) {
    if (error instanceof ConfigError) return error.fix ?? "";
  }
  throw new Error("expected a ConfigError");
}

describe("which checkpoint a target names", () => {
  const list = [
    entry("turn-1", { kind: "turn", turn: 1, sessionKey: "a", tree: tree("1") }),
    entry("turn-2", { kind: "turn", turn: 2, sessionKey: "b", tree: tree("2") }),
    entry("mine", { tree: tree("3") }),
    entry("turn-3", { kind: "turn", turn: 3, sessionKey: "a", tree: tree("4") }),
  ];
  it("counts a session's own turns back from the last", () => {
    expect(findCheckpoint(list, { turn: -1 }, "a").name).toBe("turn-3");
    expect(findCheckpoint(list, { turn: -2 }, "a").name).toBe("turn-1");
    expect(findCheckpoint(list, { turn: -1 }, "b").name).toBe("turn-2");
    // A session with no turns of its own in this copy counts every session's.
    expect(findCheckpoint(list, { turn: -1 }, "c").name).toBe("turn-3");
  });
  it("names the fix when a target is out of reach", () => {
    expect(() => findCheckpoint(list, { turn: -3 }, "a")).toThrow(/only 2 turn checkpoint/);
    expect(() => findCheckpoint(list, { turn: 1 }, "a")).toThrow(/negative whole number/);
    expect(() => findCheckpoint([], { turn: -1 })).toThrow(/no turn checkpoints/);
    expect(fixOf(() => findCheckpoint([], { name: "x" }))).toMatch(/no checkpoints yet/);
    expect(fixOf(() => findCheckpoint(list, { name: "x" }))).toMatch(
      /turn-1, turn-2, mine, turn-3/,
    );
  });
  it("takes the newest of a name", () => {
    expect(
      findCheckpoint([...list, entry("mine", { tree: tree("8") })], { name: "mine" }).tree,
    ).toBe(tree("8"));
  });
});
