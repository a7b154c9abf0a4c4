import { ExitCode } from "./errors.js";

/** The signals that stop a command: Ctrl-C, and what `kill`, CI runners and `docker stop` send. */
export type StopSignal = "SIGINT" | "SIGTERM";

/**
 * The exit code a stop by `signal` gives, as a shell reports it (128 + its number). The one place
 * this is decided: the process's own exit code and every record of the run (`run-end`,
 * `--output-format json`, fix-tests' result.json) read it from here.
 */
export function exitCodeForSignal(signal: StopSignal): ExitCode {
  return signal === "SIGTERM" ? ExitCode.terminated : ExitCode.interrupted;
}

/**
 * The reason an `AbortSignal` carries when a stop signal aborted the work, so the code a run
 * reports can follow the signal that stopped it.
 */
export class StoppedBySignal extends Error {
  constructor(readonly signal: StopSignal) {
    super(`stopped by ${signal}`);
    this.name = "StoppedBySignal";
  }
}

/**
 * The exit code of work its caller aborted: the stop signal's, when `signal` was aborted by one;
 * 130 for any other abort (an embedder's own signal), as before.
 */
export function exitCodeOfAbort(signal: AbortSignal | undefined): ExitCode {
  const reason: unknown = signal?.reason;
  return reason instanceof StoppedBySignal
    ? exitCodeForSignal(reason.signal)
    : ExitCode.interrupted;
}

/** "stopped by SIGTERM": what aborted work says of itself in a result (result.json's message). */
export function describeAbort(signal: AbortSignal | undefined): string {
  const reason: unknown = signal?.reason;
  return reason instanceof StoppedBySignal ? reason.message : "stopped by its caller's signal";
}
