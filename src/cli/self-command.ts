import { accessSync, constants, realpathSync } from "node:fs";
import path from "node:path";

/** How a client's config starts this very cordon: a program and the arguments before its own. */
export interface SelfCommand {
  command: string;
  args: string[];
}

export interface SelfCommandOptions {
  /** The running CLI's script, as started (`process.argv[1]`). */
  script: string | undefined;
  /** Where `cordon` is looked for (the PATH of the environment). */
  pathVariable: string | undefined;
  /** The node binary running this CLI (`process.execPath`). */
  nodePath: string;
}

/**
 * The command a client config should run to start the cordon that wrote it. "cordon" only when
 * that name on PATH is this same program (a global install): a client started from anywhere runs
 * what `--print-config` was run with. A project's local install (`npx cordon`, node_modules/.bin)
 * or a checkout (`node dist/cli/main.js`) is not on the client's PATH, so the config names the
 * file itself, through node when the file is not executable.
 */
export function selfCommand(options: SelfCommandOptions): SelfCommand {
  const script = options.script ? path.resolve(options.script) : undefined;
  if (!script) return { command: "cordon", args: [] };
  const self = realOrUndefined(script);
  const onPath = findOnPath("cordon", options.pathVariable);
  if (onPath !== undefined && self !== undefined && realOrUndefined(onPath) === self) {
    return { command: "cordon", args: [] };
  }
  return isExecutable(script)
    ? { command: script, args: [] }
    : { command: options.nodePath, args: [script] };
}

function findOnPath(name: string, pathVariable: string | undefined): string | undefined {
  for (const dir of (pathVariable ?? "").split(path.delimiter)) {
    // npx and npm scripts put a project's node_modules/.bin first on PATH for the command they
    // run; a client started elsewhere does not have it.
    if (!path.isAbsolute(dir) || dir.endsWith(`node_modules${path.sep}.bin`)) continue;
    const candidate = path.join(dir, name);
    if (isExecutable(candidate)) return candidate;
  }
  return undefined;
}

function isExecutable(file: string): boolean {
  try {
    accessSync(file, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

function realOrUndefined(file: string): string | undefined {
  try {
    return realpathSync(file);
  } catch {
    return undefined;
  }
}
