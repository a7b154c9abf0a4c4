import type { Sandbox } from "../../src/sandbox/index.js";

/** Counts failed operations of cordon's side of a figure, keeping the first message. */
export class FailureCount {
  count = 0;
  first: string | undefined;

  /** Runs `fn`; a failure is counted (not thrown), so one bad run does not end the figure. */
  async guard<T>(fn: () => Promise<T>): Promise<T | undefined> {
    try {
      return await fn();
    } catch (error) {
      this.count += 1;
      this.first ??= error instanceof Error ? error.message : String(error);
      return undefined;
    }
  }

  /** The failures as figure details (the first message, when there was one). */
  details(): Record<string, string> {
    return this.first ? { firstFailure: this.first } : {};
  }
}

/** `command` through the sandbox; a non-zero exit is a failure. */
export async function execOk(
  sandbox: Sandbox,
  command: string,
  signal?: AbortSignal,
): Promise<void> {
  const result = await sandbox.exec(command, { signal });
  if (result.exitCode !== 0) {
    throw new Error(
      `\`${command}\` exited with ${String(result.exitCode)}: ${result.stderr.trim()}`,
    );
  }
}
