import { FileOperationError, type FileErrorReason } from "../../../common/index.js";

const reasons = new Set<FileErrorReason>([
  "not_found",
  "permission_denied",
  "read_only",
  "is_directory",
  "not_directory",
  "outside_sandbox",
  "too_large",
  "exists",
  "other",
]);

/** strerror texts (C locale) and what they mean to a tool. */
const strerrorReasons: ReadonlyArray<[string, FileErrorReason]> = [
  ["Read-only file system", "read_only"],
  ["No such file or directory", "not_found"],
  ["Permission denied", "permission_denied"],
  ["Operation not permitted", "permission_denied"],
  ["Is a directory", "is_directory"],
  ["Not a directory", "not_directory"],
  ["File exists", "exists"],
  ["Too many levels of symbolic links", "other"],
  ["No space left on device", "other"],
  ["Directory not empty", "other"],
];

/**
 * The error of a failed file operation, from what the file script printed: its own
 * `cordon-file-error:REASON:DETAIL` line, else the strerror text of the coreutils message.
 */
export function fileErrorFrom(options: {
  operation: string;
  path: string;
  status: number;
  stderr: string;
}): FileOperationError {
  const { operation, path } = options;
  const stderr = options.stderr.trim();
  const named = /cordon-file-error:(\w+):(.*)/.exec(stderr);
  if (named?.[1] && reasons.has(named[1] as FileErrorReason)) {
    const reason = named[1] as FileErrorReason;
    return new FileOperationError(
      `cannot ${operation} ${path}: ${named[2] ?? reason}`,
      reason,
      path,
    );
  }
  const match = strerrorReasons.find(([text]) => stderr.includes(text));
  const detail = lastLine(stderr) || `exit status ${options.status}`;
  const reason = match?.[1] ?? "other";
  const message =
    reason === "other" || !match
      ? `cannot ${operation} ${path}: ${detail}`
      : `cannot ${operation} ${path}: ${match[0]}`;
  return new FileOperationError(message, reason, path);
}

function lastLine(text: string): string {
  const lines = text.split("\n").filter((line) => line.trim() !== "");
  return lines.at(-1)?.trim() ?? "";
}
