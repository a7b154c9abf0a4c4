import { spawn } from "node:child_process";
import path from "node:path";

import { packageRoot } from "../../src/common/index.js";

/** The built CLI, as a user runs it. */
export const builtCli = path.join(packageRoot(), "dist", "cli", "main.js");

export interface Finished {
  code: number | null;
  stdout: Buffer;
  stderr: string;
}

/**
 * Runs `command` as a child process with `input` on its stdin (then end-of-file) and resolves
 * when it has exited, with what it wrote.
 */
export function runProcess(
  command: string,
  args: string[],
  options: {
    env: NodeJS.ProcessEnv;
    cwd?: string | undefined;
    input?: Buffer | string | undefined;
  },
): Promise<Finished> {
  const child = spawn(command, args, { env: options.env, cwd: options.cwd, stdio: "pipe" });
  const stdout: Buffer[] = [];
  let stderr = "";
  child.stdout.on("data", (chunk: Buffer) => stdout.push(chunk));
  child.stderr.setEncoding("utf8").on("data", (chunk: string) => (stderr += chunk));
  child.stdin.on("error", () => undefined);
  child.stdin.end(options.input);
  return new Promise((resolve) =>
    child.on("close", (code) => resolve({ code, stdout: Buffer.concat(stdout), stderr })),
  );
}

/** `cordon ARGS…` with the built CLI. */
export function runBuiltCordon(
  args: string[],
  options: {
    env: NodeJS.ProcessEnv;
    cwd?: string | undefined;
    input?: Buffer | string | undefined;
  },
): Promise<Finished> {
  return runProcess(process.execPath, [builtCli, ...args], options);
}
