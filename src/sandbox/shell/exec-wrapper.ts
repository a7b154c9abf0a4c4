import { FileOperationError, type FileErrorReason } from "../../common/index.js";

// What TypeScript needs to know of the exec wrapper (exec-wrapper.sh, sent with every command by
// shellScript("execWrapper")): its refusal status and line, and where it marks an OOM kill.

/** Exit status the wrapper uses when it refused to start the command (with a stderr line). */
export const wrapperRefusalStatus = 125;

/** The wrapper's state directory unless `CORDON_STATE` names another (a container's). */
export const defaultStateDirectory = "/tmp/.cordon";

/** Where the wrapper marks a run the OOM killer ended. */
export function oomMarkerPath(id: string, stateDirectory = defaultStateDirectory): string {
  return `${stateDirectory}/oom/${id}`;
}

/**
 * When the wrapper refused to start a command it printed one line naming why; with status 125
 * and no such line, 125 is the command's own exit status. Throws the refusal as a
 * `FileOperationError` about the working directory.
 */
export function throwIfRefused(id: string, cwd: string, stderr: string): void {
  const match = new RegExp(`^cordon-exec\\[${id}\\]: (\\w+) `).exec(stderr);
  if (!match) return;
  const reason = match[1] as FileErrorReason;
  const messages: Partial<Record<FileErrorReason, string>> = {
    not_found: `the working directory ${cwd} does not exist`,
    not_directory: `the working directory ${cwd} is not a directory`,
    permission_denied: `the working directory ${cwd} cannot be entered (permission denied)`,
    outside_sandbox: `the working directory ${cwd} is outside the sandbox`,
  };
  throw new FileOperationError(
    messages[reason] ?? `cannot use working directory ${cwd}`,
    reason,
    cwd,
    {
      fix: "run the command in an existing directory of the workspace",
    },
  );
}
