import { ExitCode } from "../common/index.js";
import type { CliContext } from "./context.js";

/**
 * Ctrl-C for long commands: the first SIGINT (or SIGTERM) aborts the work gracefully — the model
 * stream and the running command stop, the session stays consistent, a `run-end` is still
 * printed — and a second one exits at once with 130.
 */
export async function withInterrupt<T>(
  context: CliContext,
  task: (signal: AbortSignal) => Promise<T>,
): Promise<T> {
  const controller = new AbortController();
  const onSignal = (name: NodeJS.Signals): void => {
    if (controller.signal.aborted) {
      context.stderr(`cordon: ${name} again; exiting now\n`);
      process.exit(ExitCode.interrupted);
    }
    context.stderr(`cordon: ${name}: stopping (press Ctrl-C again to exit at once)\n`);
    controller.abort();
  };
  process.on("SIGINT", onSignal);
  process.on("SIGTERM", onSignal);
  try {
    return await task(controller.signal);
  } finally {
    process.off("SIGINT", onSignal);
    process.off("SIGTERM", onSignal);
  }
}
