import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";

import { afterEach, beforeEach, describe, expect, it } from "vitest";

import { listCheckpoints, rollbackToCheckpoint } from "../../changes/index.js";
import { createSilentLogger, type ConfigError } from "../../common/index.js";
import { plan as planFor } from "../../policy/testing/plan-fixtures.js";
import {
  baselineGitDir,
  baselineRef,
  type CopyState,
  type SandboxLease,
  type WorkspaceCheckpoints,
} from "../../sandbox/index.js";
import { MemorySandbox } from "../../tools/testing/index.js";
import { turnCheckpointHooks, type TurnCheckpointEvent } from "./turn-checkpoints.js";

const tree = (digit: string): string => digit.repeat(40);

/** A recorder whose records the test settles one by one, in the order they were asked for. */
function heldRecorder(): WorkspaceCheckpoints & {
  asked: number;
  settle(outcome: string | Error): Promise<void>;
} {
  const waiting: Array<(outcome: string | Error) => void> = [];
  const recorder = {
    asked: 0,
    record: () => {
      recorder.asked += 1;
      return new Promise<CopyState>((resolve, reject) => {
        waiting.push((outcome) => {
          if (outcome instanceof Error) reject(outcome);
          else resolve({ tree: outcome, changed: new Map([["a.txt", "100644 x"]]) });
        });
      });
    },
    restore: () => Promise.reject(new Error("not in these tests")),
    compare: () => Promise.reject(new Error("not in these tests")),
    /** Settles the oldest record asked for, once one is (polled: the list is read first). */
    settle: async (outcome: string | Error) => {
      await until(() => waiting.length > 0);
      waiting.shift()?.(outcome);
    },
  };
  return recorder;
}

/** A moment for whatever is under way to go on (only ever before checking it has not ended). */
const drained = () => new Promise((resolve) => setTimeout(resolve, 10));

/** Polls until `condition` holds (a loaded machine is slow; the limit is generous). */
async function until(condition: () => boolean): Promise<void> {
  for (let polls = 0; polls < 2000 && !condition(); polls += 1) {
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  if (!condition()) throw new Error("the condition never held");
}

describe("a checkpoint per turn, recorded while the model answers", () => {
  let root: string;
  let copy: string;
  beforeEach(async () => {
    root = await mkdtemp(path.join(tmpdir(), "cordon-turn-checkpoints-"));
    copy = path.join(root, "copy");
    await mkdir(path.join(baselineGitDir(copy), "refs", "cordon"), { recursive: true });
    await writeFile(path.join(baselineGitDir(copy), baselineRef), `${tree("0")}\n`);
  });
  afterEach(async () => {
    await rm(root, { recursive: true, force: true });
  });

  const hooksOver = (recorder: WorkspaceCheckpoints) => {
    const events: TurnCheckpointEvent[] = [];
    const lease: SandboxLease = {
      sandbox: new MemorySandbox(),
      fresh: false,
      privateWorkspace: copy,
      checkpoints: recorder,
      release: () => Promise.resolve(),
    };
    const plan = planFor(
      { agents: { defaults: { workspace: "/w", sandbox: { mode: "all" } } } },
      { sessionKey: "task" },
    );
    const hooks = turnCheckpointHooks({
      plan,
      lease,
      emit: (event) => events.push(event),
      logger: createSilentLogger(),
    });
    if (!hooks) throw new Error("a seeded plan takes checkpoints per turn");
    return { hooks, events, lease, sessionKey: plan.sessionKey };
  };

  it("records as the run starts and as each turn's tools end; the next turn's tools wait for it", async () => {
    const recorder = heldRecorder();
    const { hooks, events } = hooksOver(recorder);
    // The copy as the run found it, recorded before any model answer.
    await until(() => recorder.asked === 1);
    let waited = false;
    const first = hooks.beforeToolCalls(1).then(() => (waited = true));
    await drained();
    expect(waited).toBe(false);
    await recorder.settle(tree("1"));
    await first;
    expect(events).toMatchObject([{ type: "checkpoint", turn: 1, name: "turn-1" }]);

    // Turn 1's tools ran: the state they left is recorded at once, beside the next model call.
    hooks.afterToolCalls(1);
    await until(() => recorder.asked === 2);
    await recorder.settle(tree("2"));
    await hooks.beforeToolCalls(2);
    expect(events[1]).toMatchObject({ turn: 2, name: "turn-2" });
    expect((await listCheckpoints(copy)).map((checkpoint) => checkpoint.tree)).toEqual([
      tree("1"),
      tree("2"),
    ]);
  });

  it("drops the state no turn's tools follow, and waits for its record before the run lets go", async () => {
    const recorder = heldRecorder();
    const { hooks } = hooksOver(recorder);
    await recorder.settle(tree("1"));
    await hooks.beforeToolCalls(1);
    hooks.afterToolCalls(1);
    let settled = false;
    const settling = hooks.settle().then(() => (settled = true));
    await drained();
    expect(settled).toBe(false);
    await recorder.settle(tree("2"));
    await settling;
    expect((await listCheckpoints(copy)).map((checkpoint) => checkpoint.name)).toEqual(["turn-1"]);
  });

  it("a record that fails is reported, and the list says that turn has no checkpoint", async () => {
    const recorder = heldRecorder();
    const { hooks, events, sessionKey, lease } = hooksOver(recorder);
    await recorder.settle(tree("1"));
    await hooks.beforeToolCalls(1);
    hooks.afterToolCalls(1);
    await recorder.settle(new Error("the inspector did not start"));
    await hooks.beforeToolCalls(2);
    expect(events[1]).toMatchObject({
      type: "checkpoint",
      turn: 2,
      error: "the inspector did not start",
    });
    expect(events[1]?.name).toBeUndefined();
    // `rollback --turn -1` would otherwise go back to turn-1, undoing a turn more than asked.
    await expect(rollbackToCheckpoint(lease, { turn: -1 }, { sessionKey })).rejects.toThrow(
      /turn-2 has no checkpoint: recording it failed \(the inspector did not start\)/,
    );
    await expect(rollbackToCheckpoint(lease, { turn: -1 }, { sessionKey })).rejects.toSatisfy(
      (error: ConfigError) => /--turn -2 goes back to turn-1/.test(error.fix ?? ""),
    );
    // The next turn counts on from the missed one.
    hooks.afterToolCalls(2);
    await recorder.settle(tree("3"));
    await hooks.beforeToolCalls(3);
    expect(events[2]).toMatchObject({ turn: 3, name: "turn-3" });
    expect((await listCheckpoints(copy)).map((checkpoint) => checkpoint.name)).toEqual([
      "turn-1",
      "turn-3",
    ]);
  });
});
