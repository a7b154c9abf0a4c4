/**
 * The error tree of cordon. Every error a user can see is a `CordonError` with a literal `code`,
 * an optional `fix` (the remedy: a config key, a flag, a command) and the process exit code the
 * CLI uses for it (DESIGN.md §7).
 */

/** Exit codes of the CLI (DESIGN.md §7). */
export const ExitCode = {
  success: 0,
  internal: 1,
  usage: 2,
  sandbox: 3,
  model: 4,
  limit: 5,
  timeout: 6,
  policy: 7,
  verificationFailed: 8,
  /** The tests cannot run in the sandbox (a missing command, module or network): not the code. */
  environment: 9,
  /** Stopped by SIGINT (Ctrl-C), as a shell reports it: 128 + 2. */
  interrupted: 130,
  /** Stopped by SIGTERM: 128 + 15. */
  terminated: 143,
} as const;
export type ExitCode = (typeof ExitCode)[keyof typeof ExitCode];

/** What each exit code means, in the words `cordon help exit-codes` and `--help` print. */
export const exitCodeMeanings: Readonly<Record<ExitCode, string>> = {
  [ExitCode.success]: "success (fix-tests: fixed and verified, or the tests already pass)",
  [ExitCode.internal]: "internal error: a bug in cordon (CORDON_DEBUG=1 shows the stack)",
  [ExitCode.usage]: "usage or config error: a flag, an argument, a path or cordon.json5",
  [ExitCode.sandbox]:
    "sandbox or infrastructure failure: the Docker engine, the image, a container",
  [ExitCode.model]: "model or API failure: the Messages API, a key, a scripted model's script",
  [ExitCode.limit]: "a turn, token or cost limit was reached",
  [ExitCode.timeout]: "a timeout: the run's, a tool's or a command's",
  [ExitCode.policy]: "blocked by the tool policy",
  [ExitCode.verificationFailed]: "fix-tests: the patch did not pass verification on a clean copy",
  [ExitCode.environment]:
    "fix-tests: the tests cannot run in the sandbox (a missing tool, module or network), not the code",
  [ExitCode.interrupted]: "stopped by SIGINT (Ctrl-C)",
  [ExitCode.terminated]: "stopped by SIGTERM",
};

export interface CordonErrorOptions {
  /** What the user can do about it, phrased as an instruction. */
  fix?: string | undefined;
  cause?: unknown;
}

const marker = Symbol.for("cordon.error");

export abstract class CordonError extends Error {
  abstract readonly code: string;
  abstract readonly exitCode: ExitCode;
  readonly fix: string | undefined;
  readonly [marker] = true;

  constructor(message: string, options: CordonErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = new.target.name;
    this.fix = options.fix;
  }

  /** Works across module copies, unlike `instanceof`. */
  static is(value: unknown): value is CordonError {
    return typeof value === "object" && value !== null && marker in value;
  }
}

/** Bad command-line usage or an invalid config file. */
export class ConfigError extends CordonError {
  readonly code = "config_invalid";
  readonly exitCode = ExitCode.usage;
}

/** The policy does not allow what was asked. */
export class PolicyDeniedError extends CordonError {
  readonly code = "policy_denied";
  readonly exitCode = ExitCode.policy;
}

/** The sandbox (Docker, an image, a container) failed. */
export class SandboxError extends CordonError {
  readonly code: string = "sandbox_error";
  readonly exitCode = ExitCode.sandbox;
}

/** No Docker engine answers. */
export class DockerUnavailableError extends SandboxError {
  override readonly code = "docker_unavailable";
}

/** A container could not be created or started. */
export class SandboxStartError extends SandboxError {
  override readonly code = "sandbox_start_failed";
}

/** The sandbox image could not be built or found. */
export class ImageError extends SandboxError {
  override readonly code = "image_error";
}

/**
 * The sandbox cannot do what the task needs before any agent turn (a `--setup-cmd` that fails, a
 * missing command, module or network): the environment, not the code. Exit 9, as `fix-tests`.
 */
export class EnvironmentError extends CordonError {
  readonly code = "environment_error";
  readonly exitCode = ExitCode.environment;
}

/** A command ran past its time limit and was killed. */
export class CommandTimeoutError extends CordonError {
  readonly code = "command_timeout";
  readonly exitCode = ExitCode.timeout;
}

/** A tool got input it cannot use; becomes an `is_error` tool result, never ends a run. */
export class ToolInputError extends CordonError {
  readonly code = "tool_input_invalid";
  readonly exitCode = ExitCode.usage;
}

/** The model API failed in a way retries did not fix. */
export class ModelError extends CordonError {
  readonly code = "model_error";
  readonly exitCode = ExitCode.model;
}

/** The operation was aborted (Ctrl-C or an embedder's signal). */
export class AbortedError extends CordonError {
  readonly code = "aborted";
  readonly exitCode = ExitCode.interrupted;
}

/** A bug: something cordon assumed cannot happen did. */
export class InternalError extends CordonError {
  readonly code = "internal_error";
  readonly exitCode = ExitCode.internal;
}

/** The exit code for any thrown value. */
export function exitCodeOf(error: unknown): ExitCode {
  if (CordonError.is(error)) return error.exitCode;
  // A host file system cordon cannot write (CORDON_HOME unwritable, a full disk) is the
  // machine's state, not a bug in cordon: an infrastructure failure, with its remedy.
  return systemErrorFix(error) === undefined ? ExitCode.internal : ExitCode.sandbox;
}

/**
 * The remedy for a host file-system error cordon did not expect (a CORDON_HOME it cannot write,
 * a full disk), from the error's own code and path; undefined for anything else.
 */
export function systemErrorFix(error: unknown): string | undefined {
  const { code, path } = (error ?? {}) as { code?: unknown; path?: unknown };
  if (typeof path !== "string") return undefined;
  const uid = typeof process.getuid === "function" ? ` (uid ${process.getuid()})` : "";
  switch (code) {
    case "EACCES":
    case "EPERM":
      return `make ${path} writable for the user running cordon${uid}, or set CORDON_HOME to a directory that user owns`;
    case "EROFS":
      return `${path} is on a read-only file system: set CORDON_HOME to a writable directory`;
    case "ENOSPC":
      return `free disk space where ${path} is, or set CORDON_HOME to another disk`;
    default:
      return undefined;
  }
}

/** A one-line message for any thrown value, without a stack trace. */
export function messageOf(error: unknown): string {
  if (error instanceof Error) return error.message;
  return String(error);
}

/** Why a file operation inside a sandbox failed; tools turn these into clear messages. */
export type FileErrorReason =
  | "not_found"
  | "permission_denied"
  | "read_only"
  | "is_directory"
  | "not_directory"
  | "outside_sandbox"
  | "too_large"
  | "exists"
  | "other";

/**
 * A file operation failed for a reason the kernel (or the host backend's confinement) gave.
 * Not an infrastructure failure: inside the agent loop it becomes an `is_error` tool result.
 */
export class FileOperationError extends CordonError {
  readonly code = "file_operation_failed";
  readonly exitCode = ExitCode.sandbox;
  constructor(
    message: string,
    readonly reason: FileErrorReason,
    /** The sandbox path the operation was about. */
    readonly path: string,
    options: CordonErrorOptions = {},
  ) {
    super(message, options);
  }
}
