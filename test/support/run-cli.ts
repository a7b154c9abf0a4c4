import { runCli } from "../../src/cli/run-cli.js";

export interface CliRun {
  exitCode: number;
  stdout: string;
  stderr: string;
}

/**
 * Runs the CLI in-process, as `cordon <args>`, with stdout and stderr captured. The environment
 * is the test's own plus `env`; logs stay silent unless a test asks for them.
 */
export async function runCordon(
  args: string[],
  env: NodeJS.ProcessEnv = {},
  stdin = "",
  /** Answers the questions a command would ask on a terminal (default: no terminal). */
  confirm?: (question: string) => Promise<boolean | undefined>,
): Promise<CliRun> {
  let stdout = "";
  let stderr = "";
  const exitCode = await runCli(
    ["node", "cordon", ...args],
    {
      ...process.env,
      CORDON_LOG_LEVEL: "silent",
      ...env,
    },
    {
      stdout: (text) => {
        stdout += text;
      },
      stderr: (text) => {
        stderr += text;
      },
      readStdin: () => Promise.resolve(stdin),
      confirm: confirm ?? (() => Promise.resolve(undefined)),
    },
  );
  return { exitCode, stdout, stderr };
}
