import { readFile, realpath } from "node:fs/promises";

import { z } from "zod";

import { CordonError, ExitCode } from "../common/index.js";
import { seedMarkerPath } from "../sandbox/index.js";

/** A session's private copy was seeded from another workspace than the one a command runs in. */
export class ForeignSeedError extends CordonError {
  readonly code = "changes_foreign_seed";
  readonly exitCode = ExitCode.usage;
}

const seedMarker = z.object({ source: z.string().min(1) });

/**
 * Refuses to diff or apply the changes of a private copy that was not seeded from `workspace`:
 * its patch belongs to another project, and applied here it would write that project's changes.
 * Both paths are compared after resolving symlinks.
 */
export async function assertSeededFrom(
  privateWorkspace: string,
  workspace: string,
  sessionKey: string,
): Promise<void> {
  const markerFile = seedMarkerPath(privateWorkspace);
  const text = await readFile(markerFile, "utf8").catch(() => undefined);
  let parsed: z.infer<typeof seedMarker> | undefined;
  try {
    parsed = text === undefined ? undefined : seedMarker.parse(JSON.parse(text));
  } catch {
    parsed = undefined;
  }
  if (!parsed) {
    throw new ForeignSeedError(
      `cannot tell which workspace the private copy of session ${sessionKey} was seeded from (${markerFile} is missing or unreadable)`,
      {
        fix: `remove the session's sandbox with \`cordon sandbox rm\` and run again, so it is seeded from this workspace`,
      },
    );
  }
  const [source, here] = await Promise.all([
    realpath(parsed.source).catch(() => parsed.source),
    realpath(workspace).catch(() => workspace),
  ]);
  if (source !== here) {
    throw new ForeignSeedError(
      `the private copy of session ${sessionKey} was seeded from ${source}, not from this workspace ${here}; its changes belong there`,
      {
        fix: `run the command in ${source} (or with --workspace ${source}), or use another --session here`,
      },
    );
  }
}
