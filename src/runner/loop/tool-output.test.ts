import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";

import {
  lastShownLines,
  shownLine,
  ToolOutputStream,
  type ToolOutputEvent,
} from "./tool-output.js";

describe("ToolOutputStream", () => {
  beforeEach(() => {
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout", "performance"] });
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  function stream(limits = {}) {
    const events: ToolOutputEvent[] = [];
    const output = new ToolOutputStream({
      toolCallId: "t1",
      name: "exec",
      emit: (event) => events.push(event),
      limits,
    });
    return { events, output };
  }

  it("sends the first output at the next tick, then coalesces to one event per interval", () => {
    const { events, output } = stream();
    output.push("line 1\n");
    output.push("line 2\n");
    expect(events).toEqual([]);
    vi.advanceTimersByTime(0);
    expect(events).toEqual([
      {
        type: "tool-output",
        toolCallId: "t1",
        name: "exec",
        text: "line 1\nline 2\n",
        omittedChars: 0,
        lastLine: "line 2",
      },
    ]);
    output.push("line 3\n");
    output.push("line 4\n");
    vi.advanceTimersByTime(249);
    expect(events).toHaveLength(1);
    vi.advanceTimersByTime(1);
    expect(events.map((event) => event.text)).toEqual(["line 1\nline 2\n", "line 3\nline 4\n"]);
  });

  it("sends what is pending at close, and nothing after it", () => {
    const { events, output } = stream();
    output.push("a\n");
    vi.advanceTimersByTime(0);
    output.push("b\n");
    output.close();
    output.push("c\n");
    vi.advanceTimersByTime(5_000);
    expect(events.map((event) => event.text)).toEqual(["a\n", "b\n"]);
  });

  it("keeps the newest text of an event within its cap and counts what it left out", () => {
    const { events, output } = stream({ maxEventChars: 10 });
    output.push("0123456789abcdef\n");
    vi.advanceTimersByTime(0);
    expect(events[0]).toMatchObject({
      text: "789abcdef\n",
      omittedChars: 7,
      lastLine: "0123456789abcdef",
    });
  });

  it("past the call's cap sends only a changed last line, and less often", () => {
    const { events, output } = stream({ maxEventChars: 8, maxCallChars: 8, capIntervalMs: 1000 });
    output.push("aaaaaaa\n");
    vi.advanceTimersByTime(0);
    output.push("bbbbbbb\n");
    vi.advanceTimersByTime(999);
    expect(events).toHaveLength(1);
    vi.advanceTimersByTime(1);
    expect(events[1]).toMatchObject({ text: "", omittedChars: 8, lastLine: "bbbbbbb" });
    // The same last line again: nothing new to say.
    output.push("\n\n");
    vi.advanceTimersByTime(5_000);
    expect(events).toHaveLength(2);
    expect(events.reduce((sum, event) => sum + event.text.length, 0)).toBeLessThanOrEqual(8);
  });

  it("names the last line with something in it: blank lines skipped, a redrawn line as shown", () => {
    const { events, output } = stream();
    output.push("collecting ... \n\n  \n");
    output.push("progress 10%\rprogress 55%");
    vi.advanceTimersByTime(0);
    expect(events.at(-1)?.lastLine).toBe("progress 55%");
    output.push("\rprogress 100%\r\n\n");
    output.close();
    expect(events.at(-1)?.lastLine).toBe("progress 100%");
  });

  it("keeps the raw text for stream readers, and removes terminal codes from the last line", () => {
    const { events, output } = stream();
    output.push("\u001b[32mPASSED\u001b[0m\n");
    output.close();
    expect(events[0]).toMatchObject({ text: "\u001b[32mPASSED\u001b[0m\n", lastLine: "PASSED" });
  });
});

describe("lastShownLines", () => {
  it("returns the last lines that show something, oldest first", () => {
    expect(lastShownLines("a\n\nb\n  \nc\n\n", 2)).toEqual(["b", "c"]);
    expect(lastShownLines("\n\n", 3)).toEqual([]);
    expect(shownLine(`${"x".repeat(300)}`)).toHaveLength(200);
  });
});
