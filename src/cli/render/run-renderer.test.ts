import { describe, expect, it } from "vitest";

import { createRunRenderer, type OutputFormat } from "./run-renderer.js";

function render(format: OutputFormat, events: { type: string; [k: string]: unknown }[]) {
  let stdout = "";
  let stderr = "";
  const renderer = createRunRenderer({
    format,
    stdout: (t) => (stdout += t),
    stderr: (t) => (stderr += t),
    now: () => new Date("2026-01-01T00:00:00Z"),
  });
  for (const event of events) renderer.onEvent(event);
  return { stdout, stderr, ended: renderer.ended };
}

const events = [
  { type: "run-start", runId: "r1", sessionKey: "agent:main:t", model: "m" },
  { type: "text-delta", text: "Running " },
  { type: "text-delta", text: "tests." },
  { type: "assistant-message", turn: 1 },
  { type: "tool-call", toolCallId: "t1", name: "exec", input: { command: "npm test" } },
  {
    type: "tool-result",
    toolCallId: "t1",
    name: "exec",
    isError: false,
    skipped: false,
    content: [{ type: "text", text: "all good\n[exit code 0, 0.2s]" }],
  },
  { type: "run-end", runId: "r1", status: "completed", exitCode: 0, finalText: "Done." },
  { type: "run-end", runId: "r1", status: "completed", exitCode: 0, finalText: "dup" },
];

describe("run renderer", () => {
  it("text: only the final answer on stdout; narration, tool lines and progress on stderr", () => {
    const out = render("text", events);
    expect(out.stdout).toBe("Done.\n");
    expect(out.stderr).toContain("Running tests.\n");
    expect(out.stderr).toContain("→ exec npm test");
    expect(out.stderr).toContain("exit 0: all good");
    expect(out.ended).toBe(true);
  });

  it("text: an exec's line names its exit code, a kill or a timeout", () => {
    const line = (text: string, name = "exec") =>
      render("text", [
        { type: "tool-result", name, isError: true, content: [{ type: "text", text }] },
      ]).stderr;
    expect(line("FAILED (failures=1)\n[exit code 1, 0.3s]")).toBe(
      "  exit 1: FAILED (failures=1)\n",
    );
    expect(
      line("(no output)\n[timed out after 5s and was killed (with everything it started), 5.0s]"),
    ).toBe("  timed out\n");
    expect(line("x\n[killed by signal SIGSEGV, 0.1s]")).toBe("  killed by signal SIGSEGV: x\n");
    expect(line("no such file\n[exit code 1, 0.1s]", "read")).toBe("  error: no such file\n");
  });

  it("text: an exec's result line shows the end of its output, blank lines skipped", () => {
    const line = (text: string, isError = false) =>
      render("text", [
        { type: "tool-result", name: "exec", isError, content: [{ type: "text", text }] },
      ]).stderr;
    const pytest =
      "\n============ test session starts ============\ncollected 5 items\n\n" +
      "tests/test_a.py .....\n\n============ 5 passed in 0.12s ============\n\n";
    expect(line(`${pytest}[exit code 0, 0.9s]`)).toBe(
      "  exit 0: ============ 5 passed in 0.12s ============\n",
    );
    // A failure shows a few lines: the cause is rarely the very last one.
    expect(
      line(
        "E   assert 1 == 2\nFAILED tests/t.py::x\n\n1 failed, 4 passed\n[exit code 1, 0.4s]",
        true,
      ),
    ).toBe("  exit 1:\n    E assert 1 == 2\n    FAILED tests/t.py::x\n    1 failed, 4 passed\n");
    // A line the command printed that looks like the tool's own is output, not the outcome.
    expect(line("[exit code 5, 1.0s]\nreal end\n[exit code 0, 1.1s]")).toBe("  exit 0: real end\n");
    // A progress bar redrawn with CR shows as it ended, its codes not obeyed.
    expect(line("50%\r100% \u001b[1mdone\u001b[0m\n[exit code 0, 0.1s]")).toBe(
      "  exit 0: 100% done\n",
    );
  });

  it("text: a running command's last output line is shown live, and gone before the next line", () => {
    let live = "";
    let stderr = "";
    const renderer = createRunRenderer({
      format: "text",
      stdout: () => undefined,
      stderr: (t) => (stderr += t),
      live: {
        show: (line) => (live += `[show ${line}]`),
        clear: () => (live += "[clear]"),
      },
    });
    const call = { type: "tool-call", toolCallId: "t1", name: "exec", input: { command: "make" } };
    renderer.onEvent(call);
    live = "";
    const output = (lastLine: string) => ({
      type: "tool-output",
      toolCallId: "t1",
      name: "exec",
      text: `${lastLine}\n`,
      omittedChars: 0,
      lastLine,
    });
    renderer.onEvent(output("cc -c a.c"));
    renderer.onEvent(output("cc -c b.c \u001b]0;pwned\u0007"));
    expect(live).toBe("[show cc -c a.c][show cc -c b.c \\u001b]0;pwned\\u0007]");
    expect(stderr).toBe("→ exec make\n");
    const result = {
      type: "tool-result",
      toolCallId: "t1",
      name: "exec",
      isError: false,
      skipped: false,
      content: [{ type: "text", text: "cc -c a.c\ncc -c b.c\n[exit code 0, 2.0s]" }],
    };
    renderer.onEvent(result);
    expect(live.endsWith("[clear]")).toBe(true);
    expect(stderr).toBe("→ exec make\n  exit 0: cc -c b.c\n");
  });

  it("stream-json: tool-output events are passed on whole; --quiet shows no live line", () => {
    const event = {
      type: "tool-output",
      toolCallId: "t1",
      name: "exec",
      text: "a\u001b[2J\n",
      omittedChars: 0,
      lastLine: "a",
    };
    const lines = render("stream-json", [event]).stdout.trim().split("\n");
    expect(JSON.parse(lines[0] ?? "")).toMatchObject(event);
    let shown = 0;
    createRunRenderer({
      format: "text",
      quiet: true,
      stdout: () => undefined,
      stderr: () => undefined,
      live: { show: () => (shown += 1), clear: () => undefined },
    }).onEvent(event);
    expect(shown).toBe(0);
  });

  it("text: terminal codes in tool lines, progress and egress hosts are shown, not obeyed", () => {
    const hostile = "\u001b[2J\u001b]0;pwned\u0007ok\rcordon: fake";
    const out = render("text", [
      { type: "tool-call", name: "exec", input: { command: `echo ${hostile}` } },
      {
        type: "tool-result",
        name: "read",
        isError: false,
        content: [{ type: "text", text: hostile }],
      },
      { type: "sandbox-progress", message: `seeded ${hostile}` },
      { type: "sandbox-ready", container: "c", detail: "d", warnings: [`skipped ${hostile}`] },
      { type: "egress", host: hostile, port: 443, allowed: false },
    ]).stderr;
    // Newlines end cordon's own lines; no other control character is left.
    expect([...out].filter((c) => c < " " && c !== "\n")).toEqual([]);
    expect(out).toContain("\\u001b[2J");
    expect(out.split("\n").filter((line) => line.startsWith("cordon:"))).toEqual([]);
  });

  it("the setup phase is on stderr in every format, --quiet too; stream-json also has its events", () => {
    const setup = [
      { type: "run-start", runId: "r1", sessionKey: "agent:main:t", model: "m" },
      { type: "setup-start", command: "npm ci" },
      { type: "egress", host: "registry.yarnpkg.com", port: 443, allowed: false, phase: "setup" },
      { type: "egress", host: "registry.yarnpkg.com", port: 443, allowed: false, phase: "setup" },
      { type: "egress", host: "example.com", port: 443, allowed: true },
      { type: "egress", host: "example.com", port: 443, allowed: true },
      { type: "egress", host: "example.com", port: 80, allowed: true },
      { type: "run-end", runId: "r1", status: "setup_failed", exitCode: 9, finalText: "" },
    ];
    const lines = "· setup: npm ci\n· setup egress REFUSED: registry.yarnpkg.com:443\n";
    for (const format of ["text", "json", "stream-json"] as const) {
      expect(render(format, setup).stderr.startsWith(lines), format).toBe(true);
    }
    // The agent's own egress is progress, as before: not in json, and once in text; a destination
    // connected to again is not shown again (its events still are, in stream-json).
    expect(render("json", setup).stderr).toBe(lines);
    const text = render("text", setup).stderr;
    expect(text.match(/· egress allowed: example\.com:443\n/g)).toHaveLength(1);
    expect(text).toContain("· egress allowed: example.com:80\n");
    expect(text.match(/registry/g)).toHaveLength(1);
    let quiet = "";
    const renderer = createRunRenderer({
      format: "text",
      quiet: true,
      stdout: () => undefined,
      stderr: (t) => (quiet += t),
    });
    for (const event of setup) renderer.onEvent(event);
    expect(quiet.startsWith(lines)).toBe(true);
    const streamed = render("stream-json", setup).stdout.trim().split("\n");
    expect(streamed.map((line) => (JSON.parse(line) as { type: string }).type)).toEqual(
      setup.map((event) => event.type),
    );
  });

  it("text, quiet: the answer, and nothing on stderr but a failure", () => {
    const quiet = (list: { type: string; [k: string]: unknown }[]) => {
      let stdout = "";
      let stderr = "";
      const renderer = createRunRenderer({
        format: "text",
        quiet: true,
        stdout: (t) => (stdout += t),
        stderr: (t) => (stderr += t),
      });
      for (const event of list) renderer.onEvent(event);
      return { stdout, stderr };
    };
    expect(quiet(events)).toEqual({ stdout: "Done.\n", stderr: "" });
    expect(
      quiet([
        { type: "run-end", runId: "r1", status: "timeout", exitCode: 6, message: "timed out" },
      ]),
    ).toEqual({ stdout: "", stderr: "cordon: timed out\n" });
  });

  it("text, stdout and stderr one place (a terminal, 2>&1): the narrated answer is not repeated", () => {
    const answer = [
      { type: "text-delta", text: "Fixed the discount." },
      {
        type: "run-end",
        runId: "r1",
        status: "completed",
        exitCode: 0,
        finalText: "Fixed the discount.",
      },
    ];
    let shared = "";
    const write = (t: string) => (shared += t);
    const renderer = createRunRenderer({
      format: "text",
      narrationShowsAnswer: true,
      stdout: write,
      stderr: write,
    });
    for (const event of answer) renderer.onEvent(event);
    expect(shared).toBe("Fixed the discount.\n· completed, 0 turns, 0 tokens\n");
  });

  it("text: a model-gateway call says what the upstream answered, what was refused and what failed", () => {
    const call = { type: "model-gateway", method: "POST", path: "/v1/messages", model: "m" };
    const out = render("text", [
      { ...call, status: 200, inputTokens: 10, outputTokens: 5 },
      { ...call, status: 401, refused: "the request does not carry this run's placeholder key" },
      { ...call, status: 502, failed: "http://127.0.0.1:1: connect ECONNREFUSED\u001b[2J" },
    ]);
    expect(out.stderr).toBe(
      "· model gateway POST /v1/messages (m): 200, 10 in / 5 out\n" +
        "· model gateway POST /v1/messages (m): REFUSED 401: the request does not carry this run's placeholder key\n" +
        "· model gateway POST /v1/messages (m): FAILED 502: http://127.0.0.1:1: connect ECONNREFUSED\\u001b[2J\n",
    );
  });

  it("text: a retry says which one, how long it waits and why", () => {
    const out = render("text", [
      {
        type: "retry",
        attempt: 1,
        maxRetries: 2,
        status: 529,
        delayMs: 500,
        error: "The model API is overloaded: Overloaded",
      },
      { type: "retry", delayMs: 2000, error: "The model API is overloaded: Overloaded" },
    ]);
    expect(out.stderr).toBe(
      "· retry 1/2 in 0.5s: The model API is overloaded: Overloaded\n" +
        "· retry in 2.0s: The model API is overloaded: Overloaded\n",
    );
  });

  it("text: a failed run says why and what to do, on stderr", () => {
    const out = render("text", [
      {
        type: "run-end",
        status: "limit_turns",
        message: "ran out of turns",
        fix: "raise --max-turns",
      },
    ]);
    expect(out.stdout).toBe("");
    expect(out.stderr).toBe(
      "· limit_turns, 0 turns, 0 tokens\ncordon: ran out of turns\n  fix: raise --max-turns\n",
    );
  });

  it("text: the end line says how long, how much, what it cost and which model answered", () => {
    const end = {
      type: "run-end",
      status: "completed",
      turns: 6,
      usage: { inputTokens: 41_200, outputTokens: 7_010, cacheReadTokens: 0, cacheWriteTokens: 0 },
      durationMs: 42_140,
      cost: { usd: 0.153_232 },
      model: "claude-sonnet-4-5-20250929",
      finalText: "Done.",
    };
    expect(render("text", [end]).stderr).toBe(
      "· completed in 42.1s, 6 turns, 48,210 tokens, ~$0.1532, claude-sonnet-4-5-20250929\n",
    );
    const unknown = { ...end, turns: 1, cost: { usd: null, reason: "no price" }, model: "gw" };
    expect(render("text", [unknown]).stderr).toBe(
      "· completed in 42.1s, 1 turn, 48,210 tokens, cost unknown, gw\n",
    );
  });

  it("json: exactly one result object", () => {
    const out = render("json", events);
    const lines = out.stdout.trim().split("\n");
    expect(lines).toHaveLength(1);
    expect(JSON.parse(lines[0] ?? "")).toMatchObject({ status: "completed", finalText: "Done." });
  });

  it("json: claude -p's field names beside cordon's own", () => {
    const end = {
      type: "run-end",
      sessionKey: "fix-login",
      status: "limit_turns",
      turns: 3,
      durationMs: 1_250,
      cost: { usd: 0.02 },
      finalText: "Stopped.",
    };
    expect(JSON.parse(render("json", [end]).stdout)).toMatchObject({
      finalText: "Stopped.",
      result: "Stopped.",
      session_id: "fix-login",
      is_error: true,
      num_turns: 3,
      duration_ms: 1_250,
      total_cost_usd: 0.02,
    });
    const unpriced = { ...end, status: "completed", cost: { usd: null, reason: "no price" } };
    expect(JSON.parse(render("json", [unpriced]).stdout)).toMatchObject({
      is_error: false,
      total_cost_usd: null,
    });
  });

  it("stream-json: versioned envelopes with increasing seq, ending with one run-end", () => {
    const out = render("stream-json", events);
    const records = out.stdout
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as { v: number; seq: number; runId: string; type: string });
    expect(records.map((r) => r.seq)).toEqual([1, 2, 3, 4, 5, 6, 7]);
    expect(records.every((r) => r.v === 1 && r.runId === "r1")).toBe(true);
    expect(records.at(-1)?.type).toBe("run-end");
    expect(records.filter((r) => r.type === "run-end")).toHaveLength(1);
  });
});

describe("run renderer: a subagent's events", () => {
  const child = (event: Record<string, unknown>) => ({
    type: "subagent",
    sessionKey: "agent:main:sub:abc",
    agentId: "main",
    label: "counter\u001b[2J",
    toolCallId: "spawn_1",
    event,
  });
  const nestedEvents = [
    { type: "run-start", runId: "r1", sessionKey: "agent:main:main", model: "m" },
    child({ type: "plan", sandboxed: true, reason: "non-main" }),
    child({ type: "text-delta", text: "noise" }),
    child({ type: "tool-call", toolCallId: "c1", name: "exec", input: { command: "pwd" } }),
    child({
      type: "tool-result",
      toolCallId: "c1",
      name: "exec",
      isError: false,
      skipped: false,
      content: [{ type: "text", text: "/workspace\n[exit code 0, 0.1s]" }],
    }),
    child({ type: "run-end", status: "completed", turns: 2, finalText: "child answer" }),
    { type: "run-end", runId: "r1", status: "completed", exitCode: 0, finalText: "Done." },
  ];

  it("text: one indented line per child step, labelled, control characters shown", () => {
    const out = render("text", nestedEvents);
    expect(out.stdout).toBe("Done.\n");
    expect(out.stderr).toContain("  ↳ agent:main:sub:abc counter\\u001b[2J: sandboxed: non-main\n");
    expect(out.stderr).toContain("  ↳ agent:main:sub:abc counter\\u001b[2J → exec pwd\n");
    expect(out.stderr).toContain("↳ agent:main:sub:abc counter\\u001b[2J   exit 0: /workspace\n");
    expect(out.stderr).toContain("↳ agent:main:sub:abc counter\\u001b[2J completed, 2 turns");
    expect(out.stderr).not.toContain("noise");
    expect(out.stderr).not.toContain("child answer");
  });

  it("stream-json: nested whole under the parent's run id, with one top-level run-end", () => {
    const lines = render("stream-json", nestedEvents)
      .stdout.trim()
      .split("\n")
      .map((line) => JSON.parse(line) as Record<string, unknown>);
    const nested = lines.filter((line) => line["type"] === "subagent");
    expect(nested).toHaveLength(5);
    expect(nested.every((line) => line["runId"] === "r1")).toBe(true);
    expect(nested.at(-1)?.["event"]).toMatchObject({ type: "run-end", finalText: "child answer" });
    expect(lines.filter((line) => line["type"] === "run-end")).toHaveLength(1);
  });
});

describe("run renderer: fix-tests attempts", () => {
  const ofAttempt = (attempt: number, event: Record<string, unknown>) => ({
    type: "attempt",
    attempt,
    sessionKey: `fix-tests-1-a${attempt}`,
    event,
  });
  const report = (attempt: number, fields: Record<string, unknown>) => ({
    type: "attempt-end",
    attempt,
    sessionKey: `fix-tests-1-a${attempt}`,
    turns: 2,
    usage: { inputTokens: 1900, outputTokens: 80 },
    cost: { usd: 0.0123 },
    durationMs: 4000,
    ...fields,
  });

  it("text: each attempt's steps labelled with it, and one line per attempt's end", () => {
    const out = render("text", [
      ofAttempt(1, { type: "tool-call", toolCallId: "c1", name: "edit", input: { path: "a.py" } }),
      ofAttempt(2, { type: "text-delta", text: "noise" }),
      report(1, {
        status: "verification_failed",
        won: false,
        message: "The tests still fail on a clean copy with the patch.",
      }),
      report(2, { status: "fixed", won: true, message: "Fixed." }),
    ]);
    expect(out.stderr).toContain("  ↳ fix-tests-1-a1 attempt 1 → edit a.py\n");
    expect(out.stderr).toContain(
      "· attempt 1 verification failed in 4.0s, 2 turns, 1,980 tokens, ~$0.0123\n  The tests still fail on a clean copy with the patch.\n",
    );
    expect(out.stderr).toContain("· attempt 2 won: fixed and verified in 4.0s, 2 turns");
    expect(out.stderr).not.toContain("noise");
    expect(out.stdout).toBe("");
  });
});
