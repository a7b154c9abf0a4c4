import { isDotGit } from "./dot-git.js";

/**
 * Where a symlink in a tree leads, resolved the way the kernel resolves it: component by
 * component, each link replaced by its target where it is met (relative to the directory holding
 * it), `..` taken from the directory the walk has really reached, not from the text. So
 * `l -> a/x/../victim` with `a/x -> ..` is the repository's parent's `victim`, not `a/victim`.
 */

/**
 * The target of the symlink at a workspace-relative path in the tree being judged, or undefined
 * when nothing there is a symlink (a directory, a file, or nothing at all). Only ever asked about
 * paths whose parents are already resolved (none of them is a link).
 */
export type LinkTarget = (path: string) => string | undefined;

/** What a byte that is not UTF-8 becomes in a name read as text. */
export const notUtf8 = "\uFFFD";

/** The kernel's limit of links followed in one lookup (MAXSYMLINKS); more is ELOOP. */
export const maxLinksFollowed = 40;

/** One link followed on the way. */
export interface LinkHop {
  link: string;
  target: string;
}

export type LinkResolution =
  | { ok: true; /** Workspace-relative, "" for the root. */ path: string }
  | {
      ok: false;
      why:
        "leaves the workspace" | "enters .git" | "loops" | "has an empty target" | "is not UTF-8";
      /** The links followed, in order, up to the one that went wrong. */
      chain: LinkHop[];
      /** The link whose target took the walk out (when it is not the last of `chain`). */
      culprit?: LinkHop | undefined;
    };

interface Step {
  component: string;
  /** The link whose target this component came from; undefined for the path itself. */
  from: LinkHop | undefined;
}

function stepsOf(text: string, from: LinkHop | undefined): Step[] {
  return text
    .split("/")
    .filter((component) => component !== "" && component !== ".")
    .map((component) => ({ component, from }));
}

/**
 * Resolves a workspace-relative path, following every link in it, the last component too (as
 * `open` does, not `lstat`). Refuses a walk that climbs above the root or takes an absolute
 * target (both leave the workspace), meets a `.git` component, or follows more than
 * `maxLinksFollowed` links. A component that does not exist is walked as a directory: the kernel
 * would stop there, so this only ever refuses more, never less.
 */
export function resolveLink(path: string, linkTarget: LinkTarget): LinkResolution {
  const resolved: string[] = [];
  const chain: LinkHop[] = [];
  const pending = stepsOf(path, undefined);
  for (let step = pending.shift(); step !== undefined; step = pending.shift()) {
    if (step.component === "..") {
      if (resolved.length === 0) {
        const culprit = step.from !== chain.at(-1) ? step.from : undefined;
        return { ok: false, why: "leaves the workspace", chain, culprit };
      }
      resolved.pop();
      continue;
    }
    if (isDotGit(step.component)) return { ok: false, why: "enters .git", chain };
    const here = [...resolved, step.component].join("/");
    const target = linkTarget(here);
    if (target === undefined) {
      resolved.push(step.component);
      continue;
    }
    const hop = { link: here, target };
    chain.push(hop);
    if (chain.length > maxLinksFollowed) return { ok: false, why: "loops", chain };
    if (target === "") return { ok: false, why: "has an empty target", chain };
    // Names are read as UTF-8 with U+FFFD for bad bytes: two different names could look alike.
    if (target.includes(notUtf8)) return { ok: false, why: "is not UTF-8", chain };
    if (target.startsWith("/")) return { ok: false, why: "leaves the workspace", chain };
    // The target is read from the link's own directory: `resolved` stays where it is.
    pending.unshift(...stepsOf(target, hop));
  }
  return { ok: true, path: resolved.join("/") };
}

/** Chains longer than this are shown by their ends (a loop is 41 links long). */
const shownHops = 6;

/** `l -> a/x/../victim: a/x -> .. leaves the workspace`: the chain a refusal names. */
export function describeResolution(resolution: LinkResolution & { ok: false }): string {
  const hops = resolution.chain.map((hop) => `${hop.link} -> ${hop.target}`);
  const shown =
    hops.length > shownHops ? [...hops.slice(0, shownHops - 1), "…", hops.at(-1) ?? ""] : hops;
  const why =
    resolution.why === "loops"
      ? `loops (more than ${maxLinksFollowed} links: the kernel's ELOOP)`
      : resolution.why;
  const through = resolution.culprit
    ? ` (by the \`..\` of ${resolution.culprit.link} -> ${resolution.culprit.target})`
    : "";
  return [shown.join(": "), `${why}${through}`].filter((part) => part !== "").join(" ");
}
