import { spawn } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
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

/** One step of the script test/support/pty-session.py plays (see its docstring). */
export type TerminalStep =
  | { expect: string }
  | { send: string }
  | { resize: [rows: number, columns: number] }
  | { signal: "SIGTERM" | "SIGINT" | "SIGHUP" };

/** What a command did on the pseudo-terminal, and the state it left the terminal in. */
export interface TerminalSession {
  exitCode: number;
  output: string;
  canonical: boolean;
  echo: boolean;
}

const ptySession = path.join(packageRoot(), "test", "support", "pty-session.py");

/**
 * `cordon ARGS…` with the built CLI on a pseudo-terminal of its own (24x80, its controlling
 * terminal), driven by `steps` as a person at the terminal would. Rejects, with what was seen,
 * when an expected text never showed.
 */
export async function cordonOnTerminal(
  steps: TerminalStep[],
  args: string[],
  options: { env: NodeJS.ProcessEnv; cwd?: string | undefined },
): Promise<TerminalSession> {
  const scratch = await mkdtemp(path.join(tmpdir(), "cordon-pty-"));
  try {
    const script = path.join(scratch, "steps.json");
    await writeFile(script, JSON.stringify(steps));
    const driven = await runProcess(
      "python3",
      [ptySession, script, "--", process.execPath, builtCli, ...args],
      options,
    );
    if (driven.code !== 0 || driven.stderr !== "") {
      throw new Error(`pty-session.py failed (${driven.code}): ${driven.stderr}`);
    }
    return JSON.parse(driven.stdout.toString()) as TerminalSession;
  } finally {
    await rm(scratch, { recursive: true, force: true });
  }
}
