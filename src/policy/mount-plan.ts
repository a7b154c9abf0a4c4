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
import { planned, type Planned } from "./planned.js";

/** What lstat finds at a host path (a symlink is reported as one, not followed). */
export type HostEntryKind = "directory" | "file" | "symlink" | "other";

export interface MountPlanInput {
  workspaceAccess: WorkspaceAccess;
  /** Absolute host path. */
  agentWorkspace: string;
  /** Absolute host path; for access none and ro. */
  privateWorkspace?: string | undefined;
  /** Normalised container workdir. */
  workdir: string;
  /** tmpfs mount points (normalised). */
  tmpfsTargets: readonly string[];
  /** `sandbox.protectGitDir`: the real repository's `.git` stays read-only in the sandbox. */
  gitDir: { protect: boolean; key: string };
  /** `sandbox.docker.binds`, the roots their sources must lie in (absolute or `~/`), and keys. */
  binds: {
    entries: readonly BindConfig[];
    roots: readonly string[];
    allowExternalSources: boolean;
    key: string;
    rootsKey: string;
  };
  /** The host, injected so policy stays pure: lstat, realpath, home and what is never mounted. */
  host: {
    homeDir: string;
    realpath: (p: string) => string;
    entryKind: (p: string) => HostEntryKind | undefined;
    protectedPaths: readonly ProtectedPath[];
  };
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
function planGitDirMount(input: MountPlanInput): Planned<MountSpec | undefined> {
  if (input.workspaceAccess !== "rw") return planned(undefined);
  const gitDir = path.posix.join(input.agentWorkspace, ".git");
  const key = input.gitDir.key;
  if (!input.gitDir.protect) {
    return planned(undefined, {
      warnings: [
        `${key} is false: the agent can write ${gitDir} (hooks, config) that git on this machine runs later; set it to true unless the agent must commit`,
      ],
    });
  }
  const kind = input.host.entryKind(gitDir);
  switch (kind) {
    case undefined:
      return planned(undefined, {
        warnings: [
          `${gitDir} does not exist, so there is no .git to keep read-only: the agent can create one (hooks, config) that git run in this directory would use`,
        ],
      });
    case "directory":
    case "file":
      return planned({
        source: gitDir,
        target: path.posix.join(input.workdir, ".git"),
        readOnly: true,
        role: "git-dir",
      });
    case "symlink":
    case "other":
      return planned(undefined, {
        issues: [
          {
            path: key,
            message: `${gitDir} is ${kind === "symlink" ? "a symlink" : "neither a directory nor a gitdir file"}, so it cannot be mounted read-only in the sandbox; make it a real directory (or worktree file), or set ${key} to false`,
          },
        ],
      });
  }
}

/**
 * The mounts of DESIGN.md §4: access `none` mounts the private workspace at the workdir, `ro`
 * adds the agent workspace read-only at /agent, `rw` mounts the agent workspace itself with its
 * `.git` read-only on top (`protectGitDir`); then the configured binds, each validated (absolute
 * source, not protected, inside the allowed roots — as written and after symlinks — a target
 * that does not cover the workspace, and never the protected `.git` read-write).
 */
export function planMounts(input: MountPlanInput): Planned<MountSpec[]> {
  const { host, binds } = input;
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
  if (gitDirMount.value) mounts.push(gitDirMount.value);
  const issues: ConfigIssue[] = [...gitDirMount.issues];
  const warnings: string[] = [...gitDirMount.warnings];
  // Whatever the access mode, no bind may hand the sandbox write access to the real `.git`.
  const guardedGitDir =
    input.gitDir.protect && host.entryKind(path.posix.join(input.agentWorkspace, ".git"))
      ? path.posix.join(input.agentWorkspace, ".git")
      : undefined;

  const reserved = [input.workdir, ...(input.workspaceAccess === "ro" ? [agentMountPoint] : [])];
  const roots = binds.roots.map((root) => normalizeAbsolute(expandHome(root, host.homeDir)));
  const realRoots = roots.map((root) => normalizeAbsolute(safeRealpath(host.realpath, root)));
  const targets = new Set<string>(mounts.map((m) => m.target.toLowerCase()));

  binds.entries.forEach((bind, index) => {
    const where = `${binds.key}[${index}]`;
    const refuse = (message: string) => issues.push({ path: where, message });
    const parsed = parseBind(bind);
    if (typeof parsed === "string") return refuse(parsed);
    const written = expandHome(parsed.source, host.homeDir);
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
      realpath: host.realpath,
      protectedPaths: host.protectedPaths,
    });
    if (protectedProblem) return refuse(`source ${protectedProblem}; it is never mounted`);

    const real = normalizeAbsolute(safeRealpath(host.realpath, source));
    const inRoots = roots.some((root) => isWithin(source, root));
    const realInRoots =
      realRoots.some((root) => isWithin(real, root)) || roots.some((root) => isWithin(real, root));
    if (!(inRoots && realInRoots)) {
      const shown = real === source ? source : `${source} (resolves to ${real})`;
      if (!binds.allowExternalSources) {
        return refuse(
          `source ${shown} is outside the allowed bind roots [${roots.join(", ")}]; add a root to ${binds.rootsKey} (or set sandbox.docker.dangerouslyAllowExternalBindSources: true)`,
        );
      }
      warnings.push(
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
        `source ${real} exposes the repository's ${guardedGitDir} read-write, which ${input.gitDir.key} keeps read-only; mount it read-only (:ro) or set ${input.gitDir.key} to false`,
      );
    }
    if (
      input.workspaceAccess !== "rw" &&
      (isWithin(input.agentWorkspace, real) || isWithin(real, input.agentWorkspace)) &&
      !parsed.readOnly
    ) {
      warnings.push(
        `${where} mounts the agent workspace (or part of it) read-write at ${target}, although workspace access is "${input.workspaceAccess}": changes there are live on the host`,
      );
    }
    targets.add(target.toLowerCase());
    // The real path is what gets mounted, so a symlink swapped after this check cannot redirect it.
    mounts.push({ source: real, target, readOnly: parsed.readOnly, role: "bind" });
    return undefined;
  });
  return planned(mounts, { issues, warnings });
}
