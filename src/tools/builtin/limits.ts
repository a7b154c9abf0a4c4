/** Output bounds of the built-in tools: what one tool result may cost the model's context. */
export const limits = {
  /** Characters of tool output text a result carries at most. */
  outputChars: 32_000,
  /** Lines `read` returns when no `limit` is given. */
  readLines: 2000,
  /** A longer line is cut in `read` output (the file is not changed). */
  readLineChars: 2000,
  /** `read` refuses text files larger than this, pointing at grep / ranged reads. Bytes. */
  readMaxBytes: 16 * 1024 * 1024,
  /** Images above this are refused (the model API's per-image limit). Bytes. */
  imageMaxBytes: 5 * 1024 * 1024,
  /** Files `edit` and `apply_patch` will load. Bytes. */
  editMaxBytes: 16 * 1024 * 1024,
  /** Entries `ls` shows. */
  lsEntries: 500,
  /** Paths `find` shows. */
  findResults: 500,
  /** Matching lines `grep` shows. */
  grepMatches: 300,
  /** Default and maximum exec timeout, seconds. */
  execDefaultTimeoutSec: 300,
  execMaxTimeoutSec: 3600,
} as const;
