import { describe, expect, it } from "vitest";
import { AbortedError } from "../../common/index.js";
import type { ExecOptions } from "../../sandbox/index.js";
import { MemorySandbox } from "../testing/memory-sandbox.js";
import { toolHarness } from "../testing/harness.js";
import { limits } from "./limits.js";

describe("exec", () => {
  it("returns combined output and the exit code", async () => {
    const sandbox = new MemorySandbox({
      exec: () => ({ stdout: "built\n", stderr: "warning: x\n" }),
    });
    const { call, text } = toolHarness(sandbox);
    const result = await call("exec", { command: "make" });
    expect(result.isError).toBe(false);
    expect(text(result)).toBe("built\nwarning: x\n[exit code 0, 0.0s]");
  });

  it("passes workdir, env and the timeout to the sandbox, with an output cap", async () => {
    const sandbox = new MemorySandbox();
    const { call } = toolHarness(sandbox);
    await call("exec", {
      command: "ls",
      workdir: "/workspace/sub dir",
      env: { A: "1" },
      timeoutSec: 2.5,
    });
    await call("exec", { command: "ls" });
    const [first, second] = sandbox.callsTo("exec").map((c) => c.args[1] as ExecOptions);
    expect(first).toMatchObject({ cwd: "/workspace/sub dir", env: { A: "1" }, timeoutMs: 2500 });
    expect(first?.maxOutputBytes).toBeLessThanOrEqual(limits.outputChars);
    expect(second?.timeoutMs).toBe(limits.execDefaultTimeoutSec * 1000);
  });

  it("passes the command to the sandbox unchanged (the sandbox runs it with bash -lc)", async () => {
    const command = `echo "it's" | tr a-z A-Z && printf '%s\\n' $HOME; rm -- -rf`;
    const sandbox = new MemorySandbox();
    await toolHarness(sandbox).call("exec", { command });
    expect(sandbox.callsTo("exec")[0]?.args[0]).toBe(command);
  });

  it("marks a non-zero exit as an error result that still shows the output", async () => {
    const sandbox = new MemorySandbox({
      exec: () => ({ exitCode: 2, stderr: "no such target\n" }),
    });
    const { call, text } = toolHarness(sandbox);
    const result = await call("exec", { command: "make nope" });
    expect(result.isError).toBe(true);
    expect(text(result)).toBe("no such target\n[exit code 2, 0.0s]");
  });

  it("says when a command timed out, was OOM-killed or died of a signal", async () => {
    const cases = [
      [
        { exitCode: null, timedOut: true, signal: "SIGKILL" },
        /timed out after 1s and was killed.*\n.*Raise timeoutSec.*background: true/s,
      ],
      [{ exitCode: null, oomKilled: true, signal: "SIGKILL" }, /out-of-memory killer/],
      [{ exitCode: null, signal: "SIGSEGV" }, /killed by signal SIGSEGV/],
    ] as const;
    for (const [scripted, message] of cases) {
      const sandbox = new MemorySandbox({ exec: () => scripted });
      const { call, text } = toolHarness(sandbox);
      const result = await call("exec", { command: "x", timeoutSec: 1 });
      expect(result.isError).toBe(true);
      expect(text(result)).toMatch(message);
    }
  });

  it("keeps head and tail of an output bomb and names the full log", async () => {
    const bomb = Array.from({ length: 200_000 }, (_, i) => `line ${i}`).join("\n");
    const sandbox = new MemorySandbox({ exec: () => ({ stdout: `BEGIN\n${bomb}\nEND\n` }) });
    const { call, text } = toolHarness(sandbox);
    const out = text(await call("exec", { command: "yes" }));
    expect(out.length).toBeLessThan(limits.outputChars + 500);
    expect(out.startsWith("BEGIN\n")).toBe(true);
    expect(out).toMatch(/END\n\[exit code 0/);
    expect(out).toMatch(/characters omitted/);
    expect(out).toMatch(/Full output: \/tmp\/cordon-exec-1\.log/);
    expect(sandbox.files.getText("/tmp/cordon-exec-1.log")).toContain("line 199999");
  });

  it("interleaves streamed stdout and stderr in arrival order and decodes split UTF-8", async () => {
    const encode = (text: string): Uint8Array => new TextEncoder().encode(text);
    const sandbox = new MemorySandbox({
      exec: (_command, options) => {
        // A streaming backend: chunks through the callbacks (the fake adds no stdout/stderr).
        const euro = encode("€");
        options.onStdout?.(encode("out1 "));
        options.onStderr?.(encode("err1 "));
        options.onStdout?.(euro.subarray(0, 1));
        options.onStderr?.(encode("err2 "));
        options.onStdout?.(euro.subarray(1));
        options.onStdout?.(encode(" out2"));
        return {};
      },
    });
    const { call, text } = toolHarness(sandbox);
    expect(text(await call("exec", { command: "x" }))).toBe(
      "out1 err1 err2 € out2\n[exit code 0, 0.0s]",
    );
  });

  it("says (no output) for a silent command", async () => {
    const { call, text } = toolHarness(new MemorySandbox());
    expect(text(await call("exec", { command: "true" }))).toBe("(no output)\n[exit code 0, 0.0s]");
  });

  it("rejects a timeout above the maximum and an empty command", async () => {
    const { call, text } = toolHarness(new MemorySandbox());
    expect(
      text(await call("exec", { command: "x", timeoutSec: limits.execMaxTimeoutSec + 1 })),
    ).toMatch(/timeoutSec/);
    expect(text(await call("exec", { command: "" }))).toMatch(/command/);
  });

  it("turns an abort into an error result", async () => {
    const sandbox = new MemorySandbox({
      exec: () => {
        throw new AbortedError("exec was aborted");
      },
    });
    const { call, text } = toolHarness(sandbox);
    const result = await call("exec", { command: "sleep 100" });
    expect(result.isError).toBe(true);
    expect(text(result)).toBe("The call was aborted before it finished.");
  });

  it("passes the call's abort signal to the sandbox", async () => {
    const sandbox = new MemorySandbox();
    const controller = new AbortController();
    await toolHarness(sandbox).call("exec", { command: "x" }, controller.signal);
    expect((sandbox.callsTo("exec")[0]?.args[1] as ExecOptions).signal).toBe(controller.signal);
  });
});

describe("exec background + process", () => {
  it("starts a background process and drives it through list, poll, log, write and kill", async () => {
    const sandbox = new MemorySandbox();
    const { call, text } = toolHarness(sandbox);
    const started = await call("exec", {
      command: "npm run dev",
      background: true,
      workdir: "/workspace/app",
    });
    expect(text(started)).toMatch(
      /^Started background process proc-1: npm run dev\nUse process \{"action":"poll","id":"proc-1"\}/,
    );
    expect(sandbox.callsTo("processes.start")[0]?.args[1]).toMatchObject({ cwd: "/workspace/app" });
    expect(sandbox.callsTo("exec")).toEqual([]);

    expect(text(await call("process", { action: "list" }))).toMatch(
      /proc-1: running, started .*: npm run dev/,
    );
    sandbox.processes.emit("proc-1", "listening on 3000\n");
    expect(text(await call("process", { action: "poll", id: "proc-1" }))).toMatch(
      /^listening on 3000\n\[proc-1: running/,
    );
    expect(text(await call("process", { action: "poll", id: "proc-1" }))).toMatch(
      /^\(no new output\)/,
    );
    sandbox.processes.emit("proc-1", "GET /\n");
    expect(text(await call("process", { action: "log", id: "proc-1" }))).toMatch(
      /^listening on 3000\nGET \/\n/,
    );
    expect(text(await call("process", { action: "write", id: "proc-1", data: "q\n" }))).toBe(
      "Wrote 2 bytes to the stdin of proc-1.",
    );
    expect(sandbox.processes.stdinOf("proc-1")).toBe("q\n");
    expect(text(await call("process", { action: "kill", id: "proc-1" }))).toMatch(
      /Killed proc-1\. \[proc-1: exited \(killed\)/,
    );
  });

  it("reports an exit code, an unknown id with the known ones, and missing fields", async () => {
    const sandbox = new MemorySandbox();
    const { call, text } = toolHarness(sandbox);
    expect(text(await call("process", { action: "list" }))).toBe("No background processes.");
    await call("exec", { command: "make", background: true });
    sandbox.processes.exit("proc-1", 3);
    expect(text(await call("process", { action: "poll", id: "proc-1" }))).toMatch(
      /exited with code 3/,
    );
    const unknown = await call("process", { action: "poll", id: "proc-9" });
    expect(unknown.isError).toBe(true);
    expect(text(unknown)).toBe('No background process with id "proc-9". Known ids: proc-1.');
    expect(text(await call("process", { action: "poll" }))).toMatch(/- id: action "poll" needs id/);
    expect(text(await call("process", { action: "write", id: "proc-1" }))).toMatch(
      /- data: action "write" needs data/,
    );
    expect(text(await call("process", { action: "restart", id: "proc-1" }))).toMatch(/- action: /);
    const exited = await call("process", { action: "write", id: "proc-1", data: "x" });
    expect(exited.isError).toBe(true);
  });

  it("bounds a huge process log", async () => {
    const sandbox = new MemorySandbox();
    const { call, text } = toolHarness(sandbox);
    await call("exec", { command: "yes", background: true });
    sandbox.processes.emit("proc-1", "y\n".repeat(1_000_000));
    const out = text(await call("process", { action: "log", id: "proc-1" }));
    expect(out.length).toBeLessThan(limits.outputChars + 500);
    expect(out).toMatch(/characters omitted/);
  });
});
