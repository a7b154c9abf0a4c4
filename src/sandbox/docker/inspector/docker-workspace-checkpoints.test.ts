import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";

import { afterEach, beforeEach, describe, expect, it } from "vitest";

import { SandboxError } from "../../../common/index.js";
import { baselineGitDir } from "../../workspace/index.js";
import type { SandboxQuiet } from "../sandbox-quiet.js";
import {
  dockerWorkspaceCheckpoints,
  parseCopyState,
  parseCounts,
} from "./docker-workspace-checkpoints.js";
import type { InspectionRequest, WorkspaceInspectors } from "./workspace-inspector.js";

const id = (digit: string): string => digit.repeat(40);

describe("a copy's state as the inspector prints it", () => {
  it("reads the changed files verbatim, then the tree id", () => {
    const raw = Buffer.from(
      `:100644 100755 ${id("1")} ${id("1")} M\0run.sh\0:100644 000000 ${id("2")} ${id("0")} D\0a b\nc\0${id("a")}\0`,
    );
    const state = parseCopyState(raw);
    expect(state.tree).toBe(id("a"));
    expect([...state.changed]).toEqual([
      ["run.sh", `100755 ${id("1")}`],
      ["a b\nc", "deleted"],
    ]);
    expect(parseCopyState(Buffer.from(`${id("b")}\0`)).changed.size).toBe(0);
  });

  it.each([
    ["no tree id", ""],
    ["a ref instead of an id", "HEAD\0"],
    ["an option", "--upload-pack=x\0"],
    ["no terminator", id("a")],
    ["a malformed entry", `:bogus\0file\0${id("a")}\0`],
    ["changes without the tree", `:100644 100755 ${id("1")} ${id("1")} M\0${id("a")}\0`],
    ["the tree first", `${id("a")}\0:100644 100755 ${id("1")} ${id("1")} M\0run.sh\0`],
  ])("refuses %s", (_what, output) => {
    expect(() => parseCopyState(Buffer.from(output))).toThrow(SandboxError);
  });
});

describe("counts of changes between stored states as the inspector prints them", () => {
  it("reads a count or `-` (a tree gone from the store) per pair", () => {
    expect(parseCounts(Buffer.from("3\n-\n0\n"), 3)).toEqual([3, undefined, 0]);
    expect(parseCounts(Buffer.from(""), 0)).toEqual([]);
  });

  it.each([
    ["one line short", "3\n", 2],
    ["a line too many", "3\n4\n", 1],
    ["no final newline", "3", 1],
    ["not a number", "three\n", 1],
    ["a negative count", "-3\n", 1],
  ])("refuses %s", (_what, output, pairs) => {
    expect(() => parseCounts(Buffer.from(output), pairs)).toThrow(SandboxError);
  });
});

describe("a turn's record and the pause", () => {
  let workspace: string;
  beforeEach(async () => {
    workspace = await mkdtemp(path.join(tmpdir(), "cordon-checkpoints-unit-"));
    const ref = path.join(baselineGitDir(workspace), "refs", "cordon", "baseline");
    await mkdir(path.dirname(ref), { recursive: true });
    await writeFile(ref, `${id("b")}\n`);
  });
  afterEach(() => rm(workspace, { recursive: true, force: true }));

  /** Checkpoints over fake inspectors, a counting freeze, and the executor's answers in turn. */
  const setup = (answers: (SandboxQuiet | undefined)[]) => {
    const runs: { index: InspectionRequest["index"]; paused: boolean }[] = [];
    let paused = false;
    let pauses = 0;
    const inspectors = {
      start: () =>
        Promise.resolve({
          run: (request: InspectionRequest) => {
            runs.push({ index: request.index, paused });
            return Promise.resolve(Buffer.from(`${id("c")}\0`));
          },
          remove: () => Promise.resolve(),
        }),
    } as unknown as WorkspaceInspectors;
    const checkpoints = dockerWorkspaceCheckpoints({
      inspectors,
      target: {
        sandboxName: "cordon-unit",
        workspace,
        baselineGitDir: baselineGitDir(workspace),
        image: "unit",
        user: "1000:1000",
        volumes: { workspace: "w", baseline: "b", checkpoints: "c" },
      },
      freeze: async (fn) => {
        pauses += 1;
        paused = true;
        try {
          return await fn();
        } finally {
          paused = false;
        }
      },
      quiet: () => Promise.resolve(answers.shift()),
    });
    return { checkpoints, runs, pauses: () => pauses };
  };
  const idle: SandboxQuiet = { others: 1, lastPid: 90, busy: 0, requests: 4 };

  it("records an idle sandbox without pausing it, and may keep the index", async () => {
    const { checkpoints, runs, pauses } = setup([idle, { ...idle }]);
    expect((await checkpoints.record({ unpausedWhenIdle: true })).tree).toBe(id("c"));
    expect(pauses()).toBe(0);
    expect(runs).toEqual([{ index: "keep", paused: false }]);
  });

  it("pauses a sandbox where a process runs (a background writer), keeping no index", async () => {
    const { checkpoints, runs, pauses } = setup([{ ...idle, others: 2 }]);
    await checkpoints.record({ unpausedWhenIdle: true });
    expect(pauses()).toBe(1);
    expect(runs).toEqual([{ index: "reuse", paused: true }]);
  });

  it("records again, paused and from a fresh index, when a process appeared during the record", async () => {
    const { checkpoints, runs, pauses } = setup([idle, { ...idle, lastPid: 93 }]);
    await checkpoints.record({ unpausedWhenIdle: true });
    expect(pauses()).toBe(1);
    expect(runs).toEqual([
      { index: "keep", paused: false },
      { index: "fresh", paused: true },
    ]);
  });

  it("pauses when the executor cannot say (plain exec, gVisor), and for a checkpoint outside a run", async () => {
    const unknown = setup([undefined]);
    await unknown.checkpoints.record({ unpausedWhenIdle: true });
    expect(unknown.pauses()).toBe(1);
    const named = setup([idle, idle]);
    await named.checkpoints.record({});
    expect(named.pauses()).toBe(1);
    expect(named.runs).toEqual([{ index: "reuse", paused: true }]);
  });
});
