import type { PatchedFile } from "../../changes/index.js";
import { ExitCode } from "../../common/index.js";
import type { FixTestsResult } from "./fix-tests.js";

/**
 * Binary files cannot be reviewed as text, so a patch with any is refused unless the user passes
 * --allow-binary — except those the test command itself rebuilds. A test binary that was already
 * built in the user's tree is not rebuilt by the run before the agent (make sees it up to date)
 * but is after the fix; it reads as a binary change the agent made. So the patch is verified
 * without its binary files, and those the verification run then writes are the test command's
 * outputs: left out, like the files the first run wrote. What is certified is exactly the patch
 * that was verified.
 */
export function binaryPaths(files: readonly PatchedFile[]): string[] {
  return files.filter((file) => file.binary).map((file) => file.path);
}

/** The binary files of the patch split into those the verification's test run wrote, and the rest. */
export function sortBinaryFiles(
  binary: readonly string[],
  writtenByVerification: readonly string[],
): { rebuilt: string[]; refused: string[] } {
  const written = new Set(writtenByVerification);
  return {
    rebuilt: binary.filter((file) => written.has(file)),
    refused: binary.filter((file) => !written.has(file)),
  };
}

export function binaryFilesChanged(
  files: readonly string[],
): Pick<FixTestsResult, "status" | "exitCode" | "message"> {
  return {
    status: "binary_files_changed",
    exitCode: ExitCode.verificationFailed,
    message: `The patch changes binary files, which cannot be reviewed as text: ${files.join(", ")}. Rerun with --allow-binary to accept them.`,
  };
}
