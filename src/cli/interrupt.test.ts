import { afterEach, describe, expect, it } from "vitest";

import { exitCodeOfAbort } from "../common/index.js";
import { CommandSignals } from "./interrupt.js";

class Exited extends Error {
  constructor(readonly code: number) {
    super(`exit ${code}`);
  }
}

describe("CommandSignals", () => {
  let lines: string[] = [];
  let uninstall: (() => void) | undefined;
  const signals = (terminal = false): CommandSignals => {
    const handling = new CommandSignals({
      stderr: (text) => lines.push(text),
      command: "cordon sandbox prune",
      terminal,
      exit: (code) => {
        throw new Exited(code);
      },
    });
    uninstall = handling.install();
    return handling;
  };
  afterEach(() => {
    uninstall?.();
    lines = [];
  });

  /** Delivers a signal to the listeners; returns what a forced exit threw, if any. */
  const send = (name: NodeJS.Signals): Exited | undefined => {
    try {
      process.emit(name, name);
      return undefined;
    } catch (error) {
      if (error instanceof Exited) return error;
      throw error;
    }
  };

  it("SIGTERM aborts the work, then one line says what was stopped; the code is 143", async () => {
    const handling = signals();
    const work = handling.run(
      (signal) =>
        new Promise<string>((resolve) =>
          signal.addEventListener("abort", () => resolve("stopped"), { once: true }),
        ),
      () => "stopped waiting for session s; nothing ran",
    );
    send("SIGTERM");
    await expect(work).resolves.toBe("stopped");
    expect(handling.interruption).toEqual({ signal: "SIGTERM", exitCode: 143 });
    expect(lines).toEqual(["cordon: SIGTERM: stopped waiting for session s; nothing ran\n"]);
  });

  it("SIGINT gives 130, and on a terminal says at once that a second one forces", async () => {
    const handling = signals(true);
    const work = handling.run(
      (signal) => new Promise<void>((resolve) => signal.addEventListener("abort", () => resolve())),
      () => "stopped the run",
    );
    send("SIGINT");
    await work;
    expect(handling.interruption?.exitCode).toBe(130);
    expect(lines).toEqual([
      "cordon: SIGINT: stopping… (Ctrl-C again stops at once)\n",
      "cordon: SIGINT: stopped the run\n",
    ]);
  });

  it("SIGTERM on a terminal prints one line, and aborts the work with a reason that gives 143", async () => {
    const handling = signals(true);
    let reason: AbortSignal | undefined;
    const work = handling.run(
      (signal) =>
        new Promise<void>((resolve) =>
          signal.addEventListener("abort", () => {
            reason = signal;
            resolve();
          }),
        ),
      () => "stopped the run",
    );
    send("SIGTERM");
    await work;
    expect(lines).toEqual(["cordon: SIGTERM: stopped the run\n"]);
    // What the run records as its end (run-end, result.json) reads the same code from the abort.
    expect(exitCodeOfAbort(reason)).toBe(143);
    expect(exitCodeOfAbort(AbortSignal.abort())).toBe(130);
  });

  it("a second signal exits at once with the first one's code, naming what was stopped", () => {
    const handling = signals();
    void handling.run(
      () => new Promise<void>(() => undefined),
      () => "stopped the run of s",
    );
    expect(send("SIGTERM")).toBeUndefined();
    expect(send("SIGINT")?.code).toBe(143);
    expect(lines.at(-1)).toBe("cordon: SIGINT again, stopped at once: stopped the run of s\n");
  });

  it("a command without graceful work ends at once with the line and the code", () => {
    signals();
    expect(send("SIGTERM")?.code).toBe(143);
    expect(lines).toEqual(["cordon: SIGTERM: stopped `cordon sandbox prune`\n"]);
  });

  it("no listener is left once uninstalled", () => {
    const before = process.listenerCount("SIGTERM");
    signals();
    expect(process.listenerCount("SIGTERM")).toBe(before + 1);
    uninstall?.();
    uninstall = undefined;
    expect(process.listenerCount("SIGTERM")).toBe(before);
  });
});
