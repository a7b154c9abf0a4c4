import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";

import { createLiveLine, plainLiveLine, terminalLiveLine } from "./live-line.js";

describe("live line", () => {
  it("on a terminal: redrawn in place, cut to the width, erased before other output", () => {
    let out = "";
    const line = terminalLiveLine(
      (text) => (out += text),
      () => 30,
    );
    line.show("collecting tests");
    line.show("collecting tests"); // the same line: not drawn again
    line.show(`test_${"x".repeat(40)}`);
    expect(out).toBe("\r\u001b[2K  │ collecting tests" + `\r\u001b[2K  │ test_${"x".repeat(19)}…`);
    out = "";
    line.clear();
    line.clear();
    expect(out).toBe("\r\u001b[2K");
  });

  describe("not on a terminal", () => {
    beforeEach(() => {
      vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout"] });
    });
    afterEach(() => {
      vi.useRealTimers();
    });

    it("prints a plain line now and then, never a cursor code, nothing for a quick command", () => {
      let clock = 0;
      let out = "";
      const line = plainLiveLine((text) => (out += text), { intervalMs: 5_000, now: () => clock });
      line.show("step 1");
      clock = 1_000;
      line.clear(); // the quick command ended: its line was never due
      vi.advanceTimersByTime(10_000);
      expect(out).toBe("");

      line.show("step 1");
      clock = 4_000;
      line.show("step 2");
      clock = 6_000;
      vi.advanceTimersByTime(5_000);
      expect(out).toBe("  │ step 2\n");
      clock = 12_000;
      line.show("step 2");
      expect(out).toBe("  │ step 2\n");
      line.show("step 3");
      expect(out).toBe("  │ step 2\n  │ step 3\n");
      expect(out).not.toContain("\u001b");
      expect(out).not.toContain("\r");
    });
  });

  it("chooses by the target", () => {
    let out = "";
    createLiveLine({ write: (text) => (out += text), terminal: true }).show("x");
    expect(out).toBe("\r\u001b[2K  │ x");
  });
});
