import path from "node:path";

/**
 * Which host paths may be mounted into a sandbox (DESIGN.md §5). A source is refused when it is a
 * protected path, lies inside one, or contains one (mounting `~` would expose `~/.ssh`). Every
 * check runs twice: on the path as written (normalised, so `..` and `//` cannot hide anything)
 * and on the path after resolving symlinks, with the protected paths themselves resolved too.
 * Comparison ignores case, so a case-insensitive filesystem cannot be used to slip past.
 */

export type ProtectedKind = "system" | "credentials" | "docker-socket" | "state";

export interface ProtectedPath {
  path: string;
  kind: ProtectedKind;
  why: string;
}

/** Host directories no sandbox may see. */
const systemPaths = [
  "/",
  "/etc",
  "/proc",
  "/sys",
  "/dev",
  "/run",
  "/var/run",
  "/boot",
  "/var/lib/docker",
  "/var/lib/containerd",
];

/** Credential stores under a home directory. */
const credentialEntries = [
  ".ssh",
  ".aws",
  ".docker",
  ".gnupg",
  ".config",
  ".kube",
  ".azure",
  ".gcloud",
  ".terraform.d",
  ".password-store",
  ".local/share/keyrings",
  ".netrc",
  ".npmrc",
  ".pypirc",
  ".git-credentials",
  ".cargo/credentials",
  ".cargo/credentials.toml",
  ".anthropic",
];

const dockerSockets = [
  "/var/run/docker.sock",
  "/run/docker.sock",
  "/run/containerd/containerd.sock",
  "/run/podman/podman.sock",
];

/** The protected paths for a host with this home and state directory. */
export function protectedPaths(homeDir: string, stateDir: string): ProtectedPath[] {
  return [
    ...systemPaths.map((p) => ({ path: p, kind: "system" as const, why: "a system directory" })),
    // root's home too: cordon often runs as a user while /root holds the machine's keys.
    ...[...new Set([homeDir, "/root"])].flatMap((home) =>
      credentialEntries.map((entry) => ({
        path: path.posix.join(home, entry),
        kind: "credentials" as const,
        why: "a credential store",
      })),
    ),
    ...dockerSockets.map((p) => ({
      path: p,
      kind: "docker-socket" as const,
      why: "a container engine socket",
    })),
    { path: stateDir, kind: "state", why: "cordon's state directory (other sessions' data)" },
  ];
}

/** Normalises an absolute POSIX path: no `.`/`..`/`//`, no trailing slash. */
export function normalizeAbsolute(p: string): string {
  const normal = path.posix.normalize(p);
  return normal.length > 1 ? normal.replace(/\/+$/, "") : normal;
}

/** Whether `inner` is `outer` or lies below it (case-insensitive). */
export function isWithin(inner: string, outer: string): boolean {
  const a = inner.toLowerCase();
  const b = outer.toLowerCase();
  if (a === b || b === "/") return true;
  return a.startsWith(`${b}/`);
}

export interface PathCheckInput {
  /** Absolute, normalised. */
  path: string;
  realpath: (p: string) => string;
  protectedPaths: readonly ProtectedPath[];
}

/**
 * Why this path may not be mounted, or undefined when it may. `/` is special-cased: it contains
 * everything, so only mounting `/` itself is refused by it, not every path below it.
 */
export function protectedPathProblem(input: PathCheckInput): string | undefined {
  const real = normalizeAbsolute(safeRealpath(input.realpath, input.path));
  const candidates = real === input.path ? [input.path] : [input.path, real];
  for (const candidate of candidates) {
    const shown = candidate === input.path ? candidate : `${input.path} (resolves to ${real})`;
    if (/\.sock$/i.test(candidate)) return `${shown} is a socket; sockets are never mounted`;
    for (const entry of input.protectedPaths) {
      const resolved = normalizeAbsolute(safeRealpath(input.realpath, entry.path));
      for (const guarded of new Set([entry.path, resolved])) {
        if (guarded === "/") {
          if (candidate === "/") return `${shown} is the host's root directory`;
          continue;
        }
        if (isWithin(candidate, guarded)) {
          return `${shown} is ${candidate.toLowerCase() === guarded.toLowerCase() ? "" : "inside "}${guarded}, ${entry.why}`;
        }
        if (isWithin(guarded, candidate)) {
          return `${shown} contains ${guarded}, ${entry.why}`;
        }
      }
    }
  }
  return undefined;
}

/** An injected realpath that throws is treated as "no symlinks known": the written path. */
function safeRealpath(realpath: (p: string) => string, p: string): string {
  try {
    const resolved = realpath(p);
    return path.posix.isAbsolute(resolved) ? resolved : p;
  } catch {
    return p;
  }
}

export { safeRealpath };
