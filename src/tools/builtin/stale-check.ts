import type { Sandbox } from "../../sandbox/index.js";
import type { ToolContext } from "../tool-definition.js";
import { sessionStateFor, stampOf } from "../session-state.js";

/**
 * The refusal when `current` differs from what the model last read of `path`, else undefined.
 * A file never read in this session passes: there is no earlier view to be stale against.
 */
export function staleReadRefusal(
  context: ToolContext,
  path: string,
  current: Uint8Array,
): string | undefined {
  const last = sessionStateFor(context).lastRead(context.sandbox, path);
  if (!last) return undefined;
  if (stampOf(current, undefined).sha256 === last.sha256) return undefined;
  return (
    `${path} changed since you last read it (then ${last.size} bytes, now ${current.byteLength}); ` +
    `something else modified it. Nothing was written. Read it again, then redo the change against the current content.`
  );
}

/** After a tool wrote `path`, its own content is what the model now knows. */
export async function recordWritten(
  context: ToolContext,
  sandbox: Sandbox,
  path: string,
  written: Uint8Array,
): Promise<void> {
  const info = await sandbox.files.stat(path, { signal: context.signal });
  sessionStateFor(context).recordRead(sandbox, path, stampOf(written, info?.mtimeMs));
}
