import type { ExecResult, SandboxLease } from "../../sandbox/index.js";
import type { TestRun } from "./fix-tests.js";
import { countTests, unreadRunners } from "./test-count/index.js";

const outputTailBytes = 12 * 1024;

function tail(text: string, bytes: number): string {
  return text.length <= bytes ? text : `…(earlier output cut)…\n${text.slice(-bytes)}`;
}

/** One run of the test command in a sandbox, as fix-tests records it. */
export async function runTests(
  lease: SandboxLease,
  command: string,
  timeoutMs: number,
  signal: AbortSignal | undefined,
): Promise<TestRun> {
  // One stream, in the order the command wrote it, as a developer would see it in a terminal.
  const result: ExecResult = await lease.sandbox.exec(`{ ${command}\n} 2>&1`, {
    timeoutMs,
    signal,
  });
  return {
    exitCode: result.exitCode,
    timedOut: result.timedOut,
    outputTail: tail(result.stdout, outputTailBytes),
    // The runners' summaries are at the end, and exec keeps the head and the tail of a long output.
    counts: countTests(result.stdout),
    countsNotRead: unreadRunners(result.stdout),
    durationMs: result.durationMs,
  };
}
