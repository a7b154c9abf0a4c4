import { quoteShellArg, SandboxError } from "../../common/index.js";

/**
 * Pieces shared by the shell-backed sandboxes (Docker and host): the command line with its
 * per-call environment, and how an exit status reads when a signal ended the command.
 */

const envName = /^[A-Za-z_][A-Za-z0-9_]*$/;

/**
 * The command with its per-call environment exported first. The exports go into the command
 * text, not the process environment, because `bash -l` runs the profile scripts first and
 * Debian's /etc/profile resets PATH: exported in the command, the caller's values win.
 */
export function commandWithEnv(
  command: string,
  env: Readonly<Record<string, string>> | undefined,
): string {
  if (command.includes("\0")) {
    throw new SandboxError("the command contains a NUL byte, which no process argument can hold", {
      fix: "remove the NUL byte; pass binary data through stdin or a file instead",
    });
  }
  const entries = Object.entries(env ?? {});
  if (entries.length === 0) return command;
  for (const [name, value] of entries) {
    if (!envName.test(name)) {
      throw new SandboxError(`invalid environment variable name ${JSON.stringify(name)}`, {
        fix: "use names of letters, digits and underscores that do not start with a digit",
      });
    }
    if (value.includes("\0")) {
      throw new SandboxError(`environment variable ${name} contains a NUL byte`, {
        fix: "remove the NUL byte from the value",
      });
    }
  }
  const exports = entries.map(([name, value]) => quoteShellArg(`${name}=${value}`)).join(" ");
  return `export ${exports}; ${command}`;
}

/**
 * Signals whose death shells report as 128 + number and that mean the command was ended from
 * outside (or crashed). SIGPIPE (141) is left out: a pipeline reader that stops early makes it
 * routinely, and callers treat it as an exit code.
 */
const deathSignals = new Map<number, string>([
  [1, "SIGHUP"],
  [2, "SIGINT"],
  [3, "SIGQUIT"],
  [4, "SIGILL"],
  [6, "SIGABRT"],
  [7, "SIGBUS"],
  [8, "SIGFPE"],
  [9, "SIGKILL"],
  [11, "SIGSEGV"],
  [15, "SIGTERM"],
  [24, "SIGXCPU"],
  [25, "SIGXFSZ"],
]);

/**
 * Reads a shell exit status: 128 + N for a death signal becomes `{ exitCode: null, signal }`.
 * A shell cannot tell `exit 137` from a SIGKILL, so neither can this; both read as the signal.
 */
export function interpretStatus(status: number): { exitCode: number | null; signal?: string } {
  const signal = status > 128 ? deathSignals.get(status - 128) : undefined;
  return signal ? { exitCode: null, signal } : { exitCode: status };
}

/** Random bytes for run ids, filled 256 ids at a time (one call to the generator per call was
 * a tenth of a millisecond, a tenth of what the loop may add to a tool call). */
const idBytes = 6;
const idPool = new Uint8Array(idBytes * 256);
let idPoolAt = idPool.length;

/** A short random id for a run or a background process (also a file name in the sandbox). */
export function newRunId(prefix: string): string {
  if (idPoolAt === idPool.length) {
    crypto.getRandomValues(idPool);
    idPoolAt = 0;
  }
  const bytes = idPool.subarray(idPoolAt, idPoolAt + idBytes);
  idPoolAt += idBytes;
  return `${prefix}${Buffer.from(bytes).toString("hex")}`;
}

/** The environment variable a long script travels in (see `scriptInvocation`). */
export const scriptVariable = "CORDON_SCRIPT";

/**
 * How to run one of cordon's bash programs: the program travels in an environment variable and
 * the command line stays short (`bash -c eval… cordon ARGS`), so `ps` inside the sandbox shows
 * what runs, not pages of cordon's script. Each program unsets the variable first, so nothing it
 * starts inherits it.
 */
export function scriptInvocation(
  script: string,
  args: readonly string[],
): { cmd: string[]; env: string[] } {
  return {
    cmd: ["bash", "-c", `eval "$${scriptVariable}"`, "cordon", ...args],
    env: [`${scriptVariable}=${script}`],
  };
}
