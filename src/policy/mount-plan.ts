import path from "node:path";

import type { BindConfig, ConfigIssue } from "../config/index.js";
import type { MountSpec, WorkspaceAccess } from "../sandbox/index.js";
import { agentMountPoint } from "./docker-settings.js";
import {
  isWithin,
  normalizeAbsolute,
  protectedPathProblem,
  safeRealpath,
  type ProtectedPath,
} from "./path-guard.js";

/** What lstat finds at a host path (a symlink is reported as one, not followed). */
export type HostEntryKind = "directory" | "file" | "symlink" | "other";

export interface MountPlanInput {
  workspaceAccess: WorkspaceAccess;
  /** `sandbox.protectGitDir`: the real repository's `.git` stays read-only in the sandbox. */
  protectGitDir: boolean;
  protectGitDirKey: string;
  /** lstat of a host path, injected like realpath. */
  entryKind: (p: string) => HostEntryKind | undefined;
  /** Absolute host path. */
  agentWorkspace: string;
  /** Absolute host path; for access none and ro. */
  privateWorkspace?: string | undefined;
  /** Normalised container workdir. */
  workdir: string;
  /** tmpfs mount points (normalised). */
  tmpfsTargets: readonly string[];
  binds: readonly BindConfig[];
  /** Roots bind sources must lie in (already absolute). */
  bindRoots: readonly string[];
  allowExternalBindSources: boolean;
  homeDir: string;
  realpath: (p: string) => string;
  protectedPaths: readonly ProtectedPath[];
  bindsKey: string;
  bindRootsKey: string;
  problems: ConfigIssue[];
  warnings: string[];
}

/** Paths inside the container no bind may cover, contain or sit below. */
const reservedTargets = ["/proc", "/sys", "/dev"];

interface ParsedBind {
  source: string;
  target: string;
  readOnly: boolean;
}

/** `"src:dst[:ro|rw]"` or `{source, target, readOnly}`; read-only unless `rw` is asked for. */
function parseBind(bind: BindConfig): ParsedBind | string {
  if (typeof bind !== "string") {
    return { source: bind.source, target: bind.target, readOnly: bind.readOnly ?? true };
  }
  const parts = bind.split(":");
  if (parts.length < 2 || parts.length > 3) {
    return `"${bind}" is not "/host/path:/container/path[:ro|rw]"`;
  }
  const [source = "", target = "", mode = "ro"] = parts;
  if (mode !== "ro" && mode !== "rw") return `"${bind}": the mode must be ro or rw, not "${mode}"`;
  return { source, target, readOnly: mode === "ro" };
}

function expandHome(p: string, homeDir: string): string {
  if (p === "~") return homeDir;
  return p.startsWith("~/") ? path.posix.join(homeDir, p.slice(2)) : p;
}

/**
 * In `rw` mode the agent could write the real repository's `.git` — plant a hook or a
 * `core.fsmonitor` that the user's own git later runs on the host. So its `.git` (the directory,
 * or the `gitdir:` file of a linked worktree, whose git directory lies outside the workspace and
 * is not mounted at all) is mounted read-only over the workspace's `.git`. The mount runs after
 * the workspace bind (Docker orders mounts by target), and a mount point cannot be renamed or
 * removed from inside, so the agent cannot swap it either. A `.git` that is a symlink is refused:
 * Docker would follow it at mount time (a link to `~/.ssh` would expose that), and the agent
 * could replace the link with a directory of its own.
 */
function planGitDirMount(input: MountPlanInput): MountSpec | undefined {
  if (input.workspaceAccess !== "rw") return undefined;
  const gitDir = path.posix.join(input.agentWorkspace, ".git");
  if (!input.protectGitDir) {
    input.warnings.push(
      `${input.protectGitDirKey} is false: the agent can write ${gitDir} (hooks, config) that git on this machine runs later; set it to true unless the agent must commit`,
    );
    return undefined;
  }
  const kind = input.entryKind(gitDir);
  switch (kind) {
    case undefined:
      input.warnings.push(
        `${gitDir} does not exist, so there is no .git to keep read-only: the agent can create one (hooks, config) that git run in this directory would use`,
      );
      return undefined;
    case "directory":
    case "file":
      return {
        source: gitDir,
        target: path.posix.join(input.workdir, ".git"),
        readOnly: true,
        role: "git-dir",
      };
    case "symlink":
    case "other":
      input.problems.push({
        path: input.protectGitDirKey,
        message: `${gitDir} is ${kind === "symlink" ? "a symlink" : "neither a directory nor a gitdir file"}, so it cannot be mounted read-only in the sandbox; make it a real directory (or worktree file), or set ${input.protectGitDirKey} to false`,
      });
      return undefined;
  }
}

/**
 * The mounts of DESIGN.md §4: access `none` mounts the private workspace at the workdir, `ro`
 * adds the agent workspace read-only at /agent, `rw` mounts the agent workspace itself with its
 * `.git` read-only on top (`protectGitDir`); then the configured binds, each validated (absolute
 * source, not protected, inside the allowed roots — as written and after symlinks — a target
 * that does not cover the workspace, and never the protected `.git` read-write).
 */
export function planMounts(input: MountPlanInput): MountSpec[] {
  const mounts: MountSpec[] = [];
  const workspaceSource =
    input.workspaceAccess === "rw" ? input.agentWorkspace : input.privateWorkspace;
  if (workspaceSource !== undefined) {
    mounts.push({
      source: workspaceSource,
      target: input.workdir,
      readOnly: false,
      role: "workspace",
    });
  }
  if (input.workspaceAccess === "ro") {
    mounts.push({
      source: input.agentWorkspace,
      target: agentMountPoint,
      readOnly: true,
      role: "agent-workspace",
    });
  }
  const gitDirMount = planGitDirMount(input);
  if (gitDirMount) mounts.push(gitDirMount);
  // Whatever the access mode, no bind may hand the sandbox write access to the real `.git`.
  const guardedGitDir =
    input.protectGitDir && input.entryKind(path.posix.join(input.agentWorkspace, ".git"))
      ? path.posix.join(input.agentWorkspace, ".git")
      : undefined;

  const reserved = [input.workdir, ...(input.workspaceAccess === "ro" ? [agentMountPoint] : [])];
  const roots = input.bindRoots.map((root) => normalizeAbsolute(expandHome(root, input.homeDir)));
  const realRoots = roots.map((root) => normalizeAbsolute(safeRealpath(input.realpath, root)));
  const targets = new Set<string>(mounts.map((m) => m.target.toLowerCase()));

  input.binds.forEach((bind, index) => {
    const where = `${input.bindsKey}[${index}]`;
    const refuse = (message: string) => input.problems.push({ path: where, message });
    const parsed = parseBind(bind);
    if (typeof parsed === "string") return refuse(parsed);
    const written = expandHome(parsed.source, input.homeDir);
    if (/[\0\n\r]/.test(written) || /[\0\n\r]/.test(parsed.target)) {
      return refuse("paths must not contain NUL or line breaks");
    }
    if (!written.startsWith("/")) {
      return refuse(`source "${parsed.source}" must be an absolute host path (or start with ~/)`);
    }
    if (!parsed.target.startsWith("/")) {
      return refuse(`target "${parsed.target}" must be an absolute path in the container`);
    }
    const source = normalizeAbsolute(written);
    const target = normalizeAbsolute(parsed.target);

    const protectedProblem = protectedPathProblem({
      path: source,
      realpath: input.realpath,
      protectedPaths: input.protectedPaths,
    });
    if (protectedProblem) return refuse(`source ${protectedProblem}; it is never mounted`);

    const real = normalizeAbsolute(safeRealpath(input.realpath, source));
    const inRoots = roots.some((root) => isWithin(source, root));
    const realInRoots =
      realRoots.some((root) => isWithin(real, root)) || roots.some((root) => isWithin(real, root));
    if (!(inRoots && realInRoots)) {
      const shown = real === source ? source : `${source} (resolves to ${real})`;
      if (!input.allowExternalBindSources) {
        return refuse(
          `source ${shown} is outside the allowed bind roots [${roots.join(", ")}]; add a root to ${input.bindRootsKey} (or set sandbox.docker.dangerouslyAllowExternalBindSources: true)`,
        );
      }
      input.warnings.push(
        `bind source ${shown} is outside the bind roots (dangerouslyAllowExternalBindSources)`,
      );
    }

    if (target === "/") return refuse('target "/" would cover the whole container');
    for (const guarded of reserved) {
      if (isWithin(target, guarded) || isWithin(guarded, target)) {
        return refuse(`target ${target} overlaps ${guarded}, where cordon mounts the workspace`);
      }
    }
    for (const guarded of reservedTargets) {
      if (isWithin(target, guarded) || isWithin(guarded, target)) {
        return refuse(`target ${target} overlaps ${guarded}`);
      }
    }
    if (input.tmpfsTargets.some((t) => t.toLowerCase() === target.toLowerCase())) {
      return refuse(`target ${target} is also a tmpfs mount (sandbox.docker.tmpfs)`);
    }
    if (targets.has(target.toLowerCase())) return refuse(`target ${target} is mounted twice`);
    if (
      guardedGitDir !== undefined &&
      !parsed.readOnly &&
      (isWithin(guardedGitDir, real) || isWithin(real, guardedGitDir))
    ) {
      return refuse(
        `source ${real} exposes the repository's ${guardedGitDir} read-write, which ${input.protectGitDirKey} keeps read-only; mount it read-only (:ro) or set ${input.protectGitDirKey} to false`,
      );
    }
    if (
      input.workspaceAccess !== "rw" &&
      (isWithin(input.agentWorkspace, real) || isWithin(real, input.agentWorkspace)) &&
      !parsed.readOnly
    ) {
      input.warnings.push(
        `${where} mounts the agent workspace (or part of it) read-write at ${target}, although workspace access is "${input.workspaceAccess}": changes there are live on the host`,
      );
    }
    targets.add(target.toLowerCase());
    // The real path is what gets mounted, so a symlink swapped after this check cannot redirect it.
    mounts.push({ source: real, target, readOnly: parsed.readOnly, role: "bind" });
    return undefined;
  });
  return mounts;
}
