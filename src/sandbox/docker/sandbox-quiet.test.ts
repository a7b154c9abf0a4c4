import { describe, expect, it } from "vitest";

import { idleAt, idleThroughout, parseQuiet, type SandboxQuiet } from "./sandbox-quiet.js";

const idle: SandboxQuiet = { others: 1, lastPid: 40, busy: 0, requests: 7 };

describe("whether a sandbox stayed idle through a record", () => {
  it("is idle with only the keep-alive, nothing in flight, the same last pid and no frame sent", () => {
    expect(idleAt(idle)).toBe(true);
    expect(idleThroughout(idle, { ...idle })).toBe(true);
  });

  it.each<[string, Partial<SandboxQuiet>]>([
    ["a process left running (a background writer)", { others: 2 }],
    ["a zombie or another cordon process's executor", { others: 3 }],
    ["a command of this executor still running", { busy: 1 }],
    ["a kernel that does not say the last pid (gVisor)", { lastPid: 0 }],
  ])("is not idle with %s", (_what, change) => {
    expect(idleAt({ ...idle, ...change })).toBe(false);
    expect(idleThroughout({ ...idle, ...change }, idle)).toBe(false);
    expect(idleThroughout(idle, { ...idle, ...change })).toBe(false);
  });

  it("is not idle when a process was made (and maybe ended) in between, or a frame was sent", () => {
    expect(idleThroughout(idle, { ...idle, lastPid: 41 })).toBe(false);
    expect(idleThroughout(idle, { ...idle, requests: 8 })).toBe(false);
  });

  it("is not known idle when the executor did not answer", () => {
    expect(idleAt(undefined)).toBe(false);
    expect(idleThroughout(undefined, idle)).toBe(false);
    expect(idleThroughout(idle, undefined)).toBe(false);
  });
});

describe("the executor's answer", () => {
  it("adds this process's calls in flight to the executor's own", () => {
    expect(parseQuiet("1 4123 0", { pending: 0, requests: 3 })).toEqual({
      others: 1,
      lastPid: 4123,
      busy: 0,
      requests: 3,
    });
    expect(parseQuiet("1 4123 0", { pending: 2, requests: 3 })?.busy).toBe(2);
  });

  it.each(["", "1 2", "1 2 3\n", "-1 2 3", "a b c", "1 2 3 4"])("refuses %j", (text) => {
    expect(parseQuiet(text, { pending: 0, requests: 0 })).toBeUndefined();
  });
});
