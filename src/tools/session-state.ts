import { createHash } from "node:crypto";
import { posix } from "node:path";
import { FileOperationError } from "../common/index.js";
import type { Sandbox } from "../sandbox/index.js";

/** What a read saw of a file: enough to tell later whether it changed since. */
export interface FileStamp {
  /** sha256 of the bytes read, hex. Exact even when a change keeps size and mtime. */
  sha256: string;
  /** Bytes. */
  size: number;
  /** From `stat` at read time; informational (content is compared by hash). */
  mtimeMs: number | undefined;
}

/**
 * What one toolset remembers between calls: the last read of each file, for stale-write
 * protection. Keyed by sandbox id + absolute sandbox path.
 */
export class ToolSessionState {
  readonly #stamps = new Map<string, FileStamp>();

  recordRead(sandbox: Sandbox, path: string, stamp: FileStamp): void {
    this.#stamps.set(stampKey(sandbox, path), stamp);
  }

  lastRead(sandbox: Sandbox, path: string): FileStamp | undefined {
    return this.#stamps.get(stampKey(sandbox, path));
  }

  forget(sandbox: Sandbox, path: string): void {
    this.#stamps.delete(stampKey(sandbox, path));
  }
}

function stampKey(sandbox: Sandbox, path: string): string {
  return `${sandbox.id}\u0000${path}`;
}

/** Used when a tool runs without a toolset (one-off calls): one state per sandbox object. */
const defaultStates = new WeakMap<Sandbox, ToolSessionState>();

export function sessionStateFor(context: {
  sandbox: Sandbox;
  session?: ToolSessionState | undefined;
}): ToolSessionState {
  if (context.session) return context.session;
  let state = defaultStates.get(context.sandbox);
  if (!state) {
    state = new ToolSessionState();
    defaultStates.set(context.sandbox, state);
  }
  return state;
}

export function stampOf(bytes: Uint8Array, mtimeMs: number | undefined): FileStamp {
  return {
    sha256: createHash("sha256").update(bytes).digest("hex"),
    size: bytes.byteLength,
    mtimeMs,
  };
}

/** The absolute sandbox path a tool path names: relative paths resolve against `workdir`. */
export function resolveToolPath(sandbox: Sandbox, path: string): string {
  // Refused before resolving: `x\0/../y` would otherwise quietly become `y`, a file the model
  // never named.
  if (path.includes("\0")) {
    throw new FileOperationError(
      "the path contains a NUL byte, which no file name can hold; send the path without it",
      "other",
      JSON.stringify(path),
    );
  }
  return posix.resolve(sandbox.workdir, path);
}
