import { shellCommand } from "../../common/index.js";
import { exitCodeForStatus, type RunResult, type RunStatus } from "../loop/index.js";
import type { AgentRuntime, AgentRuntimeRun } from "../orchestrate/index.js";
import { OutputLines } from "./output-lines.js";

/** `agents.*.runtime: { command: [...] }`: any agent program, run in the sandbox. */
export interface CommandRuntimeSpec {
  /** The program and its arguments, run in the sandbox's workdir (argv: no shell between). */
  command: readonly string[];
  /** How the task reaches it: appended as the last argument (default) or written to stdin. */
  prompt?: "argument" | "stdin" | undefined;
}

/**
 * A generic agent CLI as cordon's runtime: the task as its last argument or on stdin, each line
 * it prints a text event, its exit code the run's outcome (0 completed; otherwise the run failed
 * as a model error would, exit 4), its stdout the final answer.
 */
export class CommandRuntime implements AgentRuntime {
  readonly name = "command";

  constructor(private readonly spec: CommandRuntimeSpec) {}

  async run(run: AgentRuntimeRun): Promise<RunResult> {
    const byArgument = (this.spec.prompt ?? "argument") === "argument";
    const argv = byArgument ? [...this.spec.command, run.prompt] : [...this.spec.command];
    run.emit({ type: "model-start", turn: 1, model: this.spec.command[0] ?? "" });
    const lines = new OutputLines((line) => run.emit({ type: "text-delta", text: `${line}\n` }));
    const result = await run.lease.sandbox.exec(shellCommand(argv), {
      stdin: byArgument ? undefined : run.prompt,
      timeoutMs: run.plan.limits.timeoutMs,
      signal: run.signal,
      onStdout: lines.push,
    });
    lines.end();
    const finalText = result.stdout.trim();
    run.emit({
      type: "assistant-message",
      turn: 1,
      model: this.spec.command[0] ?? "",
      message: { role: "assistant", content: finalText ? [{ type: "text", text: finalText }] : [] },
      stopReason: "end_turn",
    });
    const ended = (status: RunStatus, message?: string, fix?: string): RunResult => ({
      runId: run.runId,
      sessionKey: run.sessionKey,
      durationMs: Date.now() - run.startedAt,
      cost: {
        usd: null,
        reason: `${this.spec.command[0] ?? "the agent command"} calls its model itself; cordon does not see those calls`,
      },
      status,
      exitCode: exitCodeForStatus(status),
      turns: 1,
      usage: { inputTokens: 0, outputTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0 },
      finalText,
      ...(message !== undefined ? { message } : {}),
      ...(fix !== undefined ? { fix } : {}),
    });
    const program = this.spec.command[0] ?? "";
    if (result.timedOut) {
      return ended(
        "timeout",
        `${program} did not finish in the run's time limit`,
        "raise --timeout",
      );
    }
    if (result.exitCode === 0) return ended("completed");
    const tail = result.stderr.trim().split("\n").slice(-3).join(" | ").slice(0, 500);
    if (result.exitCode === 127) {
      return ended(
        "sandbox_error",
        `${program} is not in the sandbox image${tail ? `: ${tail}` : ""}`,
        "install it in the image (sandbox.docker.image) or fix agents.*.runtime.command",
      );
    }
    const how =
      result.exitCode === null
        ? `was killed by ${result.signal ?? "a signal"}`
        : `exited with code ${result.exitCode}`;
    return ended(
      "model_error",
      `the agent command ${program} ${how}${tail ? `: ${tail}` : ""}`,
      "its output is in `cordon logs`; `cordon diff` shows what it changed",
    );
  }
}
