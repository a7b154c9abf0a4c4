import {
  AbortedError,
  CommandTimeoutError,
  CordonError,
  FileOperationError,
  messageOf,
} from "../common/index.js";

/**
 * A thrown error as a sentence for the model: what happened and what to do instead. The model
 * cannot act on a stack trace, and the reasons of `FileOperationError` map to clear next steps.
 */
export function describeToolError(error: unknown, options: { workdir?: string } = {}): string {
  if (error instanceof FileOperationError) {
    return describeFileError(error, options.workdir ?? "/workspace");
  }
  if (error instanceof AbortedError) return "The call was aborted before it finished.";
  if (error instanceof CommandTimeoutError) return withFix(error.message, error.fix);
  if (CordonError.is(error)) return withFix(error.message, error.fix);
  return `The tool failed: ${messageOf(error)}`;
}

function withFix(message: string, fix: string | undefined): string {
  return fix ? `${message}\nFix: ${fix}` : message;
}

function describeFileError(error: FileOperationError, workdir: string): string {
  const path = error.path;
  switch (error.reason) {
    case "not_found":
      return `${path} does not exist. Check the path (use ls or find to see what exists).`;
    case "permission_denied":
      return `Permission denied for ${path}: the sandbox user may not access it. Work in the workspace instead.`;
    case "read_only":
      return isUnder(path, "/agent")
        ? `Cannot modify ${path}: it is on a read-only mount (/agent is read-only in workspaceAccess ro). Write under ${workdir} instead, e.g. copy the file there first.`
        : `Cannot modify ${path}: it is on a read-only mount (the sandbox root filesystem is read-only; ${workdir} and /tmp are writable). Write under ${workdir} instead.`;
    case "is_directory":
      return `${path} is a directory, not a file. Use ls to list it.`;
    case "not_directory":
      return `${path}: a component of the path is a file, not a directory.`;
    case "outside_sandbox":
      return `${path} is outside the sandbox: paths must stay inside the workspace (symlinks included). Use a path under the working directory.`;
    case "too_large":
      return `${path} is too large for this operation. Use grep, or exec with head/tail/sed -n to look at part of it.`;
    case "exists":
      return `${path} already exists.`;
    case "other":
      return `${path}: ${error.message}`;
  }
}

function isUnder(path: string, root: string): boolean {
  return path === root || path.startsWith(`${root}/`);
}
