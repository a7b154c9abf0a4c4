import { mkdir, mkdtemp, realpath, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";

import { createSilentLogger, SandboxError, type Logger } from "../../common/index.js";
import { ShellSandbox } from "../shell-sandbox.js";
import { ConfinedPaths } from "./confined-paths.js";
import { HostFiles } from "./host-files.js";
import { HostTransport } from "./host-transport.js";

export interface HostSandboxOptions {
  /** The workspace: every path must stay inside it; commands start in it. */
  root: string;
  /** Declared environment for commands, on top of PATH, HOME (= root), LANG and TERM. */
  env?: Record<string, string> | undefined;
  /**
   * Private directory for exec logs, pid files and background processes; created when missing.
   * Default: a fresh directory under the system temp directory.
   */
  stateDirectory?: string | undefined;
  /** Where PATH, LANG and TERM come from; default the current process's environment. */
  hostEnv?: NodeJS.ProcessEnv | undefined;
  logger?: Logger | undefined;
}

/**
 * The `Sandbox` of mode off: tools work on the host, confined to the workspace root (`..`,
 * absolute paths elsewhere, symlink escapes at any component and reads of hard-linked files are
 * refused), and commands run with bash in the workspace with a scrubbed environment, their whole
 * process tree killed on timeout or abort. For trusted use only: a command can still reach
 * anything the user can (DESIGN.md §4).
 */
export class HostSandbox extends ShellSandbox {
  readonly id = "host";
  readonly kind = "host" as const;

  private constructor(parts: {
    paths: ConfinedPaths;
    env: Readonly<Record<string, string>>;
    stateDirectory: string;
    logger: Logger;
  }) {
    const { paths, stateDirectory, logger } = parts;
    super({
      commands: {
        transport: new HostTransport({ cwd: paths.root, env: parts.env, stateDirectory }),
        workdir: paths.root,
        // The wrapper refuses a working directory outside the workspace; Node resolves it first
        // too (realpath is the kernel's answer), so a refusal names the path the caller gave.
        root: paths.root,
        resolveCwd: (cwd) => paths.follow(paths.lexical(cwd)),
        stateDirectory,
        logDirectory: path.join(stateDirectory, "logs"),
        logger,
      },
      files: new HostFiles(paths),
      processDirectory: path.join(stateDirectory, "proc"),
    });
  }

  static async create(options: HostSandboxOptions): Promise<HostSandbox> {
    let root: string;
    try {
      root = await realpath(path.resolve(options.root));
      if (!(await stat(root)).isDirectory()) throw new Error("not a directory");
    } catch (error) {
      throw new SandboxError(`the workspace ${options.root} is not a directory that exists`, {
        cause: error,
        fix: "create the workspace directory, or set the agent's workspace in the config",
      });
    }
    const stateDirectory = options.stateDirectory
      ? path.resolve(options.stateDirectory)
      : await mkdtemp(path.join(tmpdir(), "cordon-host-"));
    await mkdir(path.join(stateDirectory, "logs"), { recursive: true, mode: 0o700 });
    const realState = await realpath(stateDirectory);
    const host = options.hostEnv ?? process.env;
    const env: Record<string, string> = {
      PATH: host["PATH"] ?? "/usr/local/bin:/usr/bin:/bin",
      HOME: root,
      LANG: host["LANG"] ?? "C.UTF-8",
      TERM: host["TERM"] ?? "dumb",
      ...options.env,
    };
    const logger = (options.logger ?? createSilentLogger()).child({ sandbox: "host" });
    return new HostSandbox({
      // Exec logs are the one place outside the root the file tools may read.
      paths: new ConfinedPaths(root, [path.join(realState, "logs")]),
      env,
      stateDirectory: realState,
      logger,
    });
  }
}
