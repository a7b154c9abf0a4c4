import { afterEach, describe, expect, it, vi } from "vitest";

import { SandboxError } from "../../common/index.js";
import type { CommandRequest, CommandResult, ExecTransport } from "./exec-transport.js";
import { killTree } from "./run-command.js";

/** A transport whose `run` answers each call with the next of `statuses` (the last repeats). */
function transportAnswering(statuses: number[], killWrapped?: boolean) {
  const calls: CommandRequest[] = [];
  const transport = {
    run: (request: CommandRequest): Promise<CommandResult> => {
      calls.push(request);
      const exitCode = statuses[Math.min(calls.length, statuses.length) - 1] ?? 0;
      const stdout = Buffer.from(exitCode === 126 ? "OCI runtime exec failed: read init-p" : "");
      return Promise.resolve({ exitCode, stdout, stderr: Buffer.alloc(0) });
    },
    ...(killWrapped === undefined ? {} : { killWrapped: () => Promise.resolve(killWrapped) }),
  } as unknown as ExecTransport;
  return { transport, calls };
}

describe("killTree", () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it("leaves it to the executor when the executor ran the command", async () => {
    const { transport, calls } = transportAnswering([0], true);
    await killTree(transport, "x1");
    expect(calls).toHaveLength(0);
  });

  it("starts the wrapper's kill again while the sandbox refuses to start it (a full pids limit)", async () => {
    const { transport, calls } = transportAnswering([126, 126, 0], false);
    vi.useFakeTimers();
    const killed = killTree(transport, "x2");
    await vi.runAllTimersAsync();
    await killed;
    expect(calls).toHaveLength(3);
    expect(calls[0]?.cmd).toContain("kill");
    expect(calls[0]?.cmd).toContain("x2");
  });

  it("does not retry a kill that ran, whatever its status", async () => {
    const { transport, calls } = transportAnswering([1]);
    await killTree(transport, "x3");
    expect(calls).toHaveLength(1);
  });

  it("gives up with an error naming the fix when no start gets in", async () => {
    const { transport, calls } = transportAnswering([126]);
    vi.useFakeTimers();
    const killed = killTree(transport, "x4").catch((error: unknown) => error);
    await vi.runAllTimersAsync();
    const error = await killed;
    expect(error).toBeInstanceOf(SandboxError);
    expect((error as SandboxError).message).toMatch(/could not be killed.*pids limit/);
    expect((error as SandboxError).fix).toMatch(/cordon sandbox rm/);
    expect(calls.length).toBeGreaterThan(3);
  });
});
