import { spawnSync } from "node:child_process";
import { mkdir, mkdtemp, readFile, readdir, rm, writeFile } from "node:fs/promises";
import os, { tmpdir } from "node:os";
import path from "node:path";

import { afterEach, beforeEach, describe, expect, it } from "vitest";

import { AbortedError, SandboxError, sleep } from "../../common/index.js";
import {
  freezeMarkerFile,
  holdFreezeMarker,
  readFreezeMarker,
  type FreezeHolder,
} from "./freeze-marker.js";
import { holdFreezeUntilReleased } from "./testing/held-freeze.js";

const sandbox = "cordon-sbx-frozen";

/** Resolves once `condition` holds, looking every 5 ms (no deadline: vitest's timeout is it). */
async function until(condition: () => boolean | Promise<boolean>): Promise<void> {
  while (!(await condition())) await sleep(5);
}

/** A pid whose process has exited, with a start time no process of that pid can have. */
function deadHolder(): FreezeHolder {
  const exited = spawnSync(process.execPath, ["-e", ""]);
  return {
    v: 1,
    pid: exited.pid ?? 999_999,
    host: os.hostname(),
    startTicks: 1,
    token: "dead-token",
    command: "cordon rollback",
    since: "2026-01-01T00:00:00.000Z",
  };
}

describe("freeze markers", () => {
  let home: string;
  let file: string;
  beforeEach(async () => {
    home = await mkdtemp(path.join(tmpdir(), "cordon-freeze-marker-"));
    file = freezeMarkerFile(home, sandbox);
  });
  afterEach(async () => {
    await rm(home, { recursive: true, force: true });
  });

  it("exists exactly while held, names this process, and is gone after a failure too", async () => {
    const seen = await holdFreezeMarker(home, sandbox, () => readFreezeMarker(home, sandbox));
    expect(seen).toMatchObject({ v: 1, pid: process.pid, host: os.hostname() });
    expect(await readFreezeMarker(home, sandbox)).toBeUndefined();
    await expect(
      holdFreezeMarker(home, sandbox, () => Promise.reject(new Error("restore failed"))),
    ).rejects.toThrow("restore failed");
    expect(await readdir(path.dirname(file))).toEqual([]);
  });

  it("a second holder waits for a live one, says so, and goes only after it is released", async () => {
    const order: string[] = [];
    let releaseFirst!: () => void;
    const gate = new Promise<void>((resolve) => (releaseFirst = resolve));
    const first = holdFreezeMarker(home, sandbox, async () => {
      order.push("first frozen");
      await gate;
      order.push("first resumed");
    });
    await until(() => order.length === 1);
    const waits: string[] = [];
    const second = holdFreezeMarker(home, sandbox, () => Promise.resolve(order.push("second")), {
      onWait: (message) => waits.push(message),
      announceAfterMs: 0,
      pollMs: 5,
    });
    await until(() => waits.length === 1);
    expect(waits[0]).toMatch(
      new RegExp(`^waiting for .* \\(pid ${process.pid} on .*\\), which has ${sandbox} frozen`),
    );
    expect(order).toEqual(["first frozen"]);
    releaseFirst();
    await Promise.all([first, second]);
    expect(order).toEqual(["first frozen", "first resumed", "second"]);
    expect(waits).toHaveLength(1);
  });

  it("takes over a marker whose holder is dead, at once", async () => {
    await mkdir(path.dirname(file), { recursive: true });
    await writeFile(file, `${JSON.stringify(deadHolder())}\n`);
    const waits: string[] = [];
    const held = await holdFreezeMarker(home, sandbox, () => readFreezeMarker(home, sandbox), {
      onWait: (message) => waits.push(message),
      announceAfterMs: 0,
    });
    expect(held?.pid).toBe(process.pid);
    expect(waits).toEqual([]);
    expect(await readdir(path.dirname(file))).toEqual([]);
  });

  it("gives up on a live holder after the bound, naming it and how to end the wait", async () => {
    const first = await holdFreezeUntilReleased(home, sandbox);
    const error = await holdFreezeMarker(home, sandbox, () => Promise.resolve(), {
      boundMs: 20,
      pollMs: 5,
    }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(SandboxError);
    expect((error as SandboxError).message).toMatch(
      new RegExp(`^${sandbox} has been frozen by .*pid ${process.pid}.* for longer than`),
    );
    expect((error as SandboxError).fix).toMatch(new RegExp(`kill ${process.pid}`));
    // The holder's marker is left as it was.
    expect((await readFreezeMarker(home, sandbox))?.pid).toBe(process.pid);
    await first.release();
  });

  it("stops waiting when aborted", async () => {
    const first = await holdFreezeUntilReleased(home, sandbox);
    const controller = new AbortController();
    const waiting = holdFreezeMarker(home, sandbox, () => Promise.resolve(), {
      signal: controller.signal,
      pollMs: 5,
    });
    controller.abort();
    await expect(waiting).rejects.toBeInstanceOf(AbortedError);
    await first.release();
  });

  it("refuses an unreadable marker with the file to delete, and never removes what is not its own", async () => {
    await mkdir(path.dirname(file), { recursive: true });
    await writeFile(file, "not json");
    const error = await holdFreezeMarker(home, sandbox, () => Promise.resolve()).catch(
      (e: unknown) => e,
    );
    expect((error as SandboxError).message).toMatch(/cannot be read/);
    expect((error as SandboxError).fix).toBe(
      `if no cordon command uses ${sandbox} now, delete ${file}`,
    );
    expect(await readFile(file, "utf8")).toBe("not json");

    // A marker replaced by hand while held is left to its new holder on release.
    await rm(file);
    const other = { ...deadHolder(), pid: process.pid, startTicks: undefined, token: "other" };
    await holdFreezeMarker(home, sandbox, () => writeFile(file, JSON.stringify(other)));
    expect((await readFreezeMarker(home, sandbox))?.token).toBe("other");
  });

  it("refuses a container name that would leave the records directory", () => {
    expect(() => freezeMarkerFile(home, "../escape")).toThrow(/invalid container name/);
  });
});
