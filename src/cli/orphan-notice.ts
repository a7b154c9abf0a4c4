import { readFile, readdir, rename, writeFile } from "node:fs/promises";
import path from "node:path";

import { stateDirectory } from "../common/index.js";
import {
  DockerEngine,
  SandboxInventory,
  orphanGraceMs,
  privateWorkspaceRoot,
  type OrphanWorkspace,
} from "../sandbox/index.js";
import type { CliContext } from "./context.js";

/** How long the engine may take to list containers before the notice gives up (a hung engine). */
const engineWaitMs = 2_000;

/** `<stateDir>/orphans-noticed.json`: the orphans already named, so each is named once. */
function noticedFile(directory: string): string {
  return path.join(directory, "orphans-noticed.json");
}

async function readNoticed(directory: string): Promise<Set<string>> {
  try {
    const parsed: unknown = JSON.parse(await readFile(noticedFile(directory), "utf8"));
    return new Set(Array.isArray(parsed) ? parsed.filter((p) => typeof p === "string") : []);
  } catch {
    return new Set();
  }
}

/**
 * Remembers `orphans` as named (replacing what was remembered: one released and left again
 * later is named again). `sandbox list` and `doctor` call it too: they named them.
 */
export async function rememberNoticedOrphans(
  directory: string,
  orphans: readonly OrphanWorkspace[],
): Promise<void> {
  const file = noticedFile(directory);
  const paths = orphans.map((orphan) => orphan.path).sort();
  const previous = [...(await readNoticed(directory))].sort();
  if (JSON.stringify(previous) === JSON.stringify(paths)) return;
  if (paths.length === 0 && previous.length === 0) return;
  const temporary = `${file}.${process.pid}.tmp`;
  try {
    await writeFile(temporary, `${JSON.stringify(paths)}\n`);
    await rename(temporary, file);
  } catch {
    // A state directory cordon cannot write: the notice may come again, nothing worse.
  }
}

/** "2 private workspaces outlive their containers (1 still mounted, holding a loop device): …". */
export function describeOrphans(orphans: readonly OrphanWorkspace[]): string {
  const mounted = orphans.filter((orphan) => orphan.mounted).length;
  const them = orphans.length === 1 ? "it" : "them";
  const what =
    orphans.length === 1
      ? "1 private workspace outlives its container"
      : `${orphans.length} private workspaces outlive their containers`;
  const held =
    mounted === 0
      ? ""
      : mounted === 1
        ? orphans.length === 1
          ? " (still mounted, holding a loop device)"
          : " (1 still mounted, holding a loop device)"
        : ` (${mounted} still mounted, each holding a loop device)`;
  return `cordon: ${what}${held}, removed outside cordon: \`cordon sandbox prune\` releases ${them} and keeps work never applied; \`cordon sandbox list\` names ${them}\n`;
}

/**
 * After a command that used the state directory: one line when sandboxes' containers were
 * removed outside cordon (`docker rm -f`, a CI cleanup, an engine reset) and left private
 * workspaces — mounted ones hold loop devices, and `rm -rf` of the state directory fails on them.
 * Each orphan is named once. Cheap: no engine call without a private workspace old enough to be
 * an orphan (prune's grace), and then one container listing. Never fails the command.
 */
export async function noticeOrphans(context: CliContext): Promise<void> {
  const directory = stateDirectory(context.env);
  try {
    const settledBefore = Date.now() - orphanGraceMs;
    if (!(await anyWorkspace(directory))) return;
    let timer: NodeJS.Timeout | undefined;
    const orphans = await Promise.race([
      new SandboxInventory({
        engine: DockerEngine.fromEnv(context.env),
        stateDirectory: directory,
        logger: context.logger,
      }).orphans({ settledBefore }),
      new Promise<undefined>((resolve) => {
        timer = setTimeout(() => resolve(undefined), engineWaitMs);
        timer.unref();
      }),
    ]).finally(() => clearTimeout(timer));
    if (!orphans) return;
    const noticed = await readNoticed(directory);
    const fresh = orphans.filter((orphan) => !noticed.has(orphan.path));
    await rememberNoticedOrphans(directory, orphans);
    if (fresh.length > 0) context.stderr(describeOrphans(orphans));
  } catch (error) {
    context.logger.debug({ err: error }, "cannot look for orphaned workspaces");
  }
}

/** Whether the state directory has any private workspace at all (a directory listing). */
async function anyWorkspace(directory: string): Promise<boolean> {
  const names = await readdir(privateWorkspaceRoot(directory)).catch(() => []);
  return names.some((name) => !name.startsWith("."));
}
