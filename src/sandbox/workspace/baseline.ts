import { execFile } from "node:child_process";
import { lchown, mkdtemp, readdir, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";

import type { Owner } from "./owner.js";

const run = promisify(execFile);

/** The ref that records the seeded state of a private workspace; diffs are taken against it. */
export const baselineRef = "refs/cordon/baseline";

/** Environment that keeps the user's global and system git config out of cordon's own git calls. */
function isolatedGitEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  return {
    PATH: process.env["PATH"] ?? "/usr/bin:/bin",
    GIT_CONFIG_NOSYSTEM: "1",
    GIT_CONFIG_GLOBAL: "/dev/null",
    GIT_AUTHOR_NAME: "cordon",
    GIT_AUTHOR_EMAIL: "cordon@localhost",
    GIT_COMMITTER_NAME: "cordon",
    GIT_COMMITTER_EMAIL: "cordon@localhost",
    ...extra,
  };
}

async function git(cwd: string, args: string[], env?: NodeJS.ProcessEnv): Promise<string> {
  // The copy belongs to the container's user, not to this process: vouch for it explicitly.
  const { stdout } = await run("git", ["-c", `safe.directory=${cwd}`, ...args], {
    cwd,
    env: {
      ...(env ?? isolatedGitEnv()),
      // Never a repository above the copy: with CORDON_HOME inside some checkout, a copy without
      // .git would otherwise record its baseline in that checkout.
      GIT_CEILING_DIRECTORIES: path.dirname(cwd),
    },
    maxBuffer: 64 * 1024 * 1024,
  });
  return stdout;
}

/**
 * Records the current content of a freshly seeded private workspace as `refs/cordon/baseline`, so
 * later changes can be taken as one patch. Tracked and untracked (not ignored) files are included;
 * the workspace's HEAD, branches and index are not touched. A tree that is not a git repository
 * gets one (`git init`) first. Runs on the host at seeding time, before any agent touched the copy
 * (so the copy's git config is still the user's own). What git wrote is then given to `owner`, so
 * the container's user can take diffs and commit in its copy.
 */
export async function recordBaseline(workspace: string, owner?: Owner): Promise<string> {
  const inside = await git(workspace, ["rev-parse", "--is-inside-work-tree"]).catch(() => "");
  if (inside.trim() !== "true") await git(workspace, ["init", "-q"]);
  const scratch = await mkdtemp(path.join(os.tmpdir(), "cordon-baseline-"));
  try {
    // A private index: the user's staged state in the copy stays as it was.
    const env = isolatedGitEnv({ GIT_INDEX_FILE: path.join(scratch, "index") });
    await git(workspace, ["add", "-A", "."], env);
    const tree = (await git(workspace, ["write-tree"], env)).trim();
    const commit = (
      await git(workspace, ["commit-tree", tree, "-m", "cordon baseline: the seeded copy"], env)
    ).trim();
    await git(workspace, ["update-ref", baselineRef, commit], env);
    if (owner) await chownTree(path.join(workspace, ".git"), owner);
    return commit;
  } finally {
    await rm(scratch, { recursive: true, force: true });
  }
}

async function chownTree(root: string, owner: Owner): Promise<void> {
  await lchown(root, owner.uid, owner.gid);
  for (const entry of await readdir(root, { withFileTypes: true })) {
    const child = path.join(root, entry.name);
    if (entry.isDirectory()) await chownTree(child, owner);
    else await lchown(child, owner.uid, owner.gid);
  }
}
