import { execFile } from "node:child_process";
import { randomBytes } from "node:crypto";
import { constants } from "node:fs";
import {
  access,
  link,
  lstat,
  mkdir,
  readFile,
  readdir,
  realpath,
  rm,
  writeFile,
} from "node:fs/promises";
import path from "node:path";
import { promisify } from "node:util";

import { SandboxStartError, sleep } from "../../common/index.js";
import { UnanchoredDirectoryError, runOnAnchoredDirectory } from "./anchored-directory.js";
import { mountCountAt, parseMountPoints } from "./mount-table.js";
import type { Owner } from "./owner.js";
import { isErrno } from "./tree-copy.js";
import { isAlive } from "./process-alive.js";

/**
 * The disk budget of a private workspace (`sandbox.disk`). The workspace is the root of an ext4
 * filesystem in a sparse image file beside it (`<parent>/.<name>.disk.img`), loop-mounted at the
 * workspace path. The image cannot grow past its size, so a sandbox that writes more gets ENOSPC
 * and the host keeps the rest of its disk. Deleted files are discarded (holes punched in the
 * image), so the host gets their space back too.
 *
 * Why this is safe to run on the host: the image is written only by mkfs (from a seed directory no
 * container has seen) and then by the kernel's ext4 driver; no container ever sees the image file
 * itself, only the mounted tree. Mounting and unmounting act on cordon's own directory (the
 * workspace path, whose parent no container can reach); the one exception, a carried tree's
 * overlay inside the copy, goes through a handle on the checked directory (anchored-directory.ts).
 */

/**
 * Mount options, each for a reason: no set-uid binaries or device nodes from the agent's tree
 * take effect on the host; no access-time writes; and space the agent frees goes back to the host.
 */
const mountOptions = "loop,nosuid,nodev,noatime,discard";

/** CAP_SYS_ADMIN: mount(2) and loop devices need it. */
const capSysAdmin = 21n;

const run = promisify(execFile);

/** The image file that holds a private workspace's filesystem. */
export function diskImagePath(workspace: string): string {
  return path.join(path.dirname(workspace), `.${path.basename(workspace)}.disk.img`);
}

interface DiskTools {
  mkfs: string;
  mount: string;
  umount: string;
}

/** Whether this machine can bound private workspaces, and if not, why and what to do. */
export type DiskBudgetSupport =
  { enforced: true; tools: DiskTools } | { enforced: false; reason: string; fix: string };

/** What the probe reads from the host; injected in tests. */
export interface DiskHostFacts {
  /** The text of /proc/self/status (its CapEff line says what this process may do). */
  processStatus: () => Promise<string>;
  /** Directories searched for mkfs.ext4, mount and umount. */
  searchPath: string[];
  /** The loop control device. */
  loopControl: string;
}

/** This machine's facts, PATH read when probed (not when the module loads, before a caller set it). */
const realHost = (): DiskHostFacts => ({
  processStatus: () => readFile("/proc/self/status", "utf8"),
  // sbin is not on every user's PATH, but mkfs.ext4 lives there.
  searchPath: [
    ...(process.env["PATH"] ?? "").split(path.delimiter).filter(Boolean),
    "/usr/sbin",
    "/sbin",
    "/usr/bin",
    "/bin",
  ],
  loopControl: "/dev/loop-control",
});

/** Whether this process has said that sandbox.disk is not enforced here (`workspaceDiskFor`). */
let warnedNotEnforced = false;
let cachedSupport: Promise<DiskBudgetSupport> | undefined;

/** Support on this machine, probed once per process (cheap checks; `cordon doctor` tries a real mount). */
export function diskBudgetSupport(): Promise<DiskBudgetSupport> {
  cachedSupport ??= probeDiskBudgetSupport(realHost());
  return cachedSupport;
}

/**
 * For tests of the fallback on a machine that can mount: pretend support is `support` (undefined:
 * probe again).
 */
export function overrideDiskBudgetSupport(support: DiskBudgetSupport | undefined): void {
  cachedSupport = support && Promise.resolve(support);
  warnedNotEnforced = false;
}

export async function probeDiskBudgetSupport(host: DiskHostFacts): Promise<DiskBudgetSupport> {
  const status = await host.processStatus().catch(() => "");
  const capEff = /^CapEff:\s*([0-9a-f]+)$/m.exec(status)?.[1];
  if (capEff === undefined || ((BigInt(`0x${capEff}`) >> capSysAdmin) & 1n) === 0n) {
    return {
      enforced: false,
      reason: `cordon runs without the right to mount filesystems (uid ${process.getuid?.() ?? "?"}, no CAP_SYS_ADMIN)`,
      fix: `run cordon as root to bound it, or ${acceptUnbounded}`,
    };
  }
  const tools: Partial<DiskTools> = {};
  for (const [key, name] of [
    ["mkfs", "mkfs.ext4"],
    ["mount", "mount"],
    ["umount", "umount"],
  ] as const) {
    const found = await findExecutable(name, host.searchPath);
    if (!found) {
      return {
        enforced: false,
        reason: `${name} is not installed`,
        fix: `install ${key === "mkfs" ? "e2fsprogs" : "mount"} (apt-get install ${key === "mkfs" ? "e2fsprogs" : "mount"}), or ${acceptUnbounded}`,
      };
    }
    tools[key] = found;
  }
  if (
    !(await access(host.loopControl).then(
      () => true,
      () => false,
    ))
  ) {
    return {
      enforced: false,
      reason: `there are no loop devices (${host.loopControl} is missing)`,
      fix: `load the loop module (modprobe loop), or ${acceptUnbounded}`,
    };
  }
  return { enforced: true, tools: tools as DiskTools };
}

/**
 * The way out where a budget cannot be enforced, once for every project: the user's own config is
 * trusted, so a loosening key there needs no `cordon config trust` in each repository.
 */
const acceptUnbounded =
  'set sandbox.disk to "unlimited" in your user config (~/.config/cordon/config.json5) to accept unbounded private workspaces';

/** The warning an acquire gives when a budget is set but cannot be enforced. */
export function notEnforcedWarning(support: { reason: string; fix: string }): string {
  return `sandbox.disk is not enforced: ${support.reason}, so the private workspace is a plain directory, only measured while in use: the sandbox is stopped once past the budget (${support.fix})`;
}

/**
 * The disk of new private workspaces for a budget: undefined (a plain directory) when there is no
 * budget, or when this machine cannot enforce it — then with a warning.
 */
export async function workspaceDiskFor(
  diskBytes: number | undefined,
  warnings: string[],
): Promise<WorkspaceDisk | undefined> {
  if (diskBytes === undefined) return undefined;
  const support = await diskBudgetSupport();
  if (!support.enforced) {
    // Once per process: a fix-tests run with attempts makes six sandboxes or more, and the
    // machine's reason is the same for each.
    if (!warnedNotEnforced) warnings.push(notEnforcedWarning(support));
    warnedNotEnforced = true;
    return undefined;
  }
  return new WorkspaceDisk(diskBytes, support.tools);
}

export interface InstallOptions {
  /** A finished tree (a seed) to fill the filesystem from; undefined = an empty workspace. */
  from?: string | undefined;
  /** Owner of the workspace root; default this process's user. */
  owner?: Owner | undefined;
  signal?: AbortSignal | undefined;
}

/** A filesystem image of a fixed size that private workspaces are made in. */
export class WorkspaceDisk {
  constructor(
    /** The image size in bytes (`sandbox.disk`); the filesystem's bookkeeping takes a little of it. */
    readonly bytes: number,
    private readonly tools: DiskTools,
  ) {}

  /**
   * Makes the private workspace at `target`: an image built from `options.from` (mkfs copies the
   * tree with its owners and modes) is moved into place, then mounted at `target`. Returns false
   * when another process put its image in place first (that one is mounted and used: same spec,
   * same result).
   */
  async install(target: string, options: InstallOptions = {}): Promise<boolean> {
    const image = diskImagePath(target);
    await removeAbandonedImages(image);
    const building = `${image}${buildingInfix}${process.pid}-${randomBytes(4).toString("hex")}`;
    let created = false;
    try {
      await this.format(building, options);
      try {
        // link, not rename: it never replaces an image another process finished first.
        await link(building, image);
        created = true;
      } catch (error) {
        if (!isErrno(error, "EEXIST")) throw error;
      }
    } finally {
      await rm(building, { force: true });
    }
    await mkdir(target, { mode: 0o755 }).catch((error: unknown) => {
      if (!isErrno(error, "EEXIST")) throw error;
    });
    await mountImage(this.tools, image, target);
    // mkfs makes lost+found (root's, mode 0700): clutter the agent cannot even list.
    if (created) await rm(path.join(target, "lost+found"), { recursive: true, force: true });
    return created;
  }

  private async format(file: string, options: InstallOptions): Promise<void> {
    const owner = options.owner ?? { uid: process.getuid?.() ?? 0, gid: process.getgid?.() ?? 0 };
    // Created first so mkfs formats a file instead of announcing that it made one.
    await writeFile(file, "", { flag: "wx", mode: 0o600 });
    const args = [
      "-q",
      "-F",
      // No blocks reserved for root: the budget is what the sandbox gets, whoever it runs as.
      "-m",
      "0",
      "-E",
      // Lazy init leaves the sparse image sparse (a 10 GiB image starts at a few MiB on disk).
      `root_owner=${owner.uid}:${owner.gid},lazy_itable_init=1,lazy_journal_init=1`,
      ...(options.from === undefined ? [] : ["-d", options.from]),
      file,
      `${Math.floor(this.bytes / 1024)}k`,
    ];
    try {
      await run(this.tools.mkfs, args, { signal: options.signal });
    } catch (error) {
      const detail = commandError(error);
      if (/could not allocate|no space|not enough space/i.test(detail)) {
        throw new SandboxStartError(
          `the seeded copy does not fit the private workspace's disk budget of ${mebibytes(this.bytes)}`,
          {
            fix: 'raise sandbox.disk (e.g. "20g"), or leave large files out of the workspace',
            cause: error,
          },
        );
      }
      throw new SandboxStartError(
        `mkfs.ext4 could not make the private workspace's disk image: ${detail}`,
        {
          fix: 'run `cordon doctor`, or set sandbox.disk to "unlimited" to use a plain directory',
          cause: error,
        },
      );
    }
  }
}

/**
 * For an existing private workspace: mounts its image again when it is not mounted (after a host
 * reboot) and leaves a mounted one alone. A workspace without an image is a plain directory (made
 * before the budget, or where it cannot be enforced: said once, when it was made).
 */
export async function attachWorkspaceDisk(
  target: string,
  options: { diskBytes: number | undefined; warnings: string[] },
): Promise<void> {
  const image = diskImagePath(target);
  const imageStats = await lstat(image).catch(() => undefined);
  const support = await diskBudgetSupport();
  if (!imageStats) {
    // Where the budget cannot be enforced, the warning came once, when the workspace was made
    // (and `doctor` repeats it): not on every command that reuses it.
    if (options.diskBytes === undefined || !support.enforced) return;
    options.warnings.push(
      `the private workspace ${target} is a plain directory from before sandbox.disk was enforced: the sandbox can fill the host's disk through it (\`cordon sandbox rm ${path.basename(target)}\` makes a bounded one, losing its changes)`,
    );
    return;
  }
  if ((await mountCountAt(target)) === 0) {
    if (!support.enforced) {
      throw new SandboxStartError(
        `the private workspace ${target} lives in the disk image ${image}, which cannot be mounted: ${support.reason}`,
        { fix: support.fix.replace(/, or set sandbox\.disk.*$/, "") },
      );
    }
    await mountImage(support.tools, image, target);
  }
  if (options.diskBytes !== undefined && imageStats.size !== options.diskBytes) {
    // Growing in place needs CAP_SYS_RESOURCE (online resize), which root lacks on some hosts
    // (these test machines among them); offline resize is unsafe while a container holds the
    // filesystem. So a new budget applies to new workspaces.
    options.warnings.push(
      `the private workspace ${target} has a disk budget of ${mebibytes(imageStats.size)}; sandbox.disk (${mebibytes(options.diskBytes)}) applies to new workspaces (\`cordon sandbox rm ${path.basename(target)}\` makes a new one, losing its changes)`,
    );
  }
}

/**
 * Before a private workspace is deleted: unmounts it (see `unmountWorkspaceDisk`) and deletes its
 * image. A plain directory needs nothing.
 */
export async function releaseWorkspaceDisk(workspace: string): Promise<void> {
  await withWorkspaceDisk(workspace, async (target, image) => {
    await unmountLocked(target);
    const parent = path.dirname(target);
    const prefix = `${path.basename(image)}${buildingInfix}`;
    for (const name of await readdir(parent).catch(() => [])) {
      if (name.startsWith(prefix)) await rm(path.join(parent, name), { force: true });
    }
    await rm(image, { force: true });
  });
}

/**
 * Unmounts a private workspace and keeps its image, for a sandbox removed with its workspace
 * kept: no mount outlives its container, and the next acquire mounts the image again.
 */
export async function unmountWorkspaceDisk(workspace: string): Promise<void> {
  await withWorkspaceDisk(workspace, (target) => unmountLocked(target));
}

async function withWorkspaceDisk(
  workspace: string,
  fn: (target: string, image: string) => Promise<void>,
): Promise<void> {
  const parent = await realpath(path.dirname(workspace)).catch(() => undefined);
  if (!parent) return;
  const target = path.join(parent, path.basename(workspace));
  const image = diskImagePath(target);
  await withImageLock(image, () => fn(target, image));
}

/** Unmounts `target` (lazily when something still has it open: it goes when its last user does). */
async function unmountLocked(target: string): Promise<void> {
  if ((await mountCountAt(target)) === 0) return;
  const support = await diskBudgetSupport();
  if (!support.enforced) {
    throw new SandboxStartError(
      `cannot unmount the private workspace ${target}: ${support.reason}`,
      {
        fix: "remove it as root (cordon sandbox rm)",
      },
    );
  }
  // A point mounted over more than once (a race lost by hand) unmounts one layer at a time.
  for (let layer = 0; layer < 16 && (await mountCountAt(target)) > 0; layer += 1) {
    await run(support.tools.umount, [target]).catch(() =>
      run(support.tools.umount, ["-l", target]),
    );
  }
}

/**
 * Mounts an overlay of `lower` (read-only beneath) and `upper` at `target`, for carried trees
 * (carry-layers.ts, which checks `target` first and says why each path is safe). `target` lies
 * inside a private copy, so the mount goes through a handle on the checked directory, never its
 * path (anchored-directory.ts). nosuid, nodev: as a workspace image promises the host.
 */
export async function mountOverlay(
  target: string,
  layers: { lower: string; upper: string; work: string },
): Promise<void> {
  const support = await diskBudgetSupport();
  if (!support.enforced) {
    throw new SandboxStartError(`cannot mount an overlay at ${target}: ${support.reason}`, {
      fix: "run cordon as root, or remove the sandbox and run again",
    });
  }
  const options = [
    `lowerdir=${layers.lower}`,
    `upperdir=${layers.upper}`,
    `workdir=${layers.work}`,
    "nosuid",
    "nodev",
    "noatime",
  ].join(",");
  try {
    // -t: the type is named, never probed.
    await runOnAnchoredDirectory(support.tools.mount, target, (at) => [
      "-c",
      "-t",
      "overlay",
      "-o",
      options,
      "overlay",
      at,
    ]);
  } catch (error) {
    throw new SandboxStartError(`cannot mount an overlay at ${target}: ${commandError(error)}`, {
      fix: "run `cordon doctor`; or run without --carry",
      cause: error,
    });
  }
}

/**
 * Unmounts whatever is mounted at `target`, a directory inside a private copy, layer by layer,
 * through a handle on it (anchored-directory.ts). Lazily: the handle itself holds the mount, which
 * goes when its last user does. A `target` that is no longer a directory at its own path has
 * nothing of cordon's mounted there any more; what moved goes with the copy's own unmount.
 */
export async function unmountAt(target: string): Promise<void> {
  const support = await diskBudgetSupport();
  if (!support.enforced) return;
  for (let layer = 0; layer < 16 && (await mountCountAt(target)) > 0; layer += 1) {
    try {
      await runOnAnchoredDirectory(support.tools.umount, target, (at) => ["-c", "-l", at]);
    } catch (error) {
      if (error instanceof UnanchoredDirectoryError) return;
      throw error;
    }
  }
}

/**
 * Binds the private workspace mounted at `from` (its image beside it) at `to`, which must not
 * exist, without unmounting the filesystem anyone uses: a mount point cannot be renamed, so the
 * image is linked to its new name and the filesystem bind-mounted at `to` (the same superblock,
 * not a second mount of the image, which would corrupt it). A container that has `from` mounted
 * keeps its own mount of the same filesystem. What is left at `from` — its mount and the image's
 * old name — goes with `releaseWorkspaceDisk(from)`, which the caller may run later: until then
 * both paths show one filesystem. False when `to` (or its image) exists: nothing is bound then.
 *
 * Both paths are cordon's own (a parent no container can reach); nothing inside the tree is
 * followed or touched.
 */
export async function bindWorkspaceDisk(from: string, to: string): Promise<boolean> {
  const support = await diskBudgetSupport();
  if (!support.enforced) {
    throw new SandboxStartError(`cannot move the private workspace ${from}: ${support.reason}`, {
      fix: support.fix,
    });
  }
  const toImage = diskImagePath(to);
  return withImageLock(toImage, async () => {
    try {
      // link, not rename: never replaces an image that is there.
      await link(diskImagePath(from), toImage);
    } catch (error) {
      if (isErrno(error, "EEXIST")) return false;
      throw error;
    }
    try {
      await mkdir(to, { mode: 0o755 });
    } catch (error) {
      await rm(toImage, { force: true });
      if (isErrno(error, "EEXIST")) return false;
      throw error;
    }
    await run(support.tools.mount, ["--bind", "-o", bindOptions, from, to]);
    return true;
  });
}

/** A bind of a workspace filesystem keeps what its first mount promised the host. */
const bindOptions = "nosuid,nodev,noatime";

/**
 * Unmounts every workspace disk mounted below `directory` and deletes their images: for a state
 * directory about to be deleted as a whole (tests, benchmarks), where `rm -r` alone would empty
 * the mounted workspaces and then fail on their mount points.
 */
export async function releaseWorkspaceDisksBelow(directory: string): Promise<void> {
  const root = await realpath(directory).catch(() => undefined);
  if (!root) return;
  const text = await readFile("/proc/self/mountinfo", "utf8").catch(() => "");
  const below = parseMountPoints(text).filter((point) => point.startsWith(`${root}${path.sep}`));
  // Deepest first, and each once (a point mounted twice is unmounted layer by layer).
  for (const point of [...new Set(below)].sort((a, b) => b.length - a.length)) {
    await releaseWorkspaceDisk(point);
  }
}

/** Images being built are named `<image>.tmp-<pid>-<random>` until they are complete. */
const buildingInfix = ".tmp-";

/** Half-built images of processes that died while making them (each up to the budget in size). */
async function removeAbandonedImages(image: string): Promise<void> {
  const prefix = `${path.basename(image)}${buildingInfix}`;
  const parent = path.dirname(image);
  for (const name of await readdir(parent).catch(() => [])) {
    if (!name.startsWith(prefix)) continue;
    const pid = Number(name.slice(prefix.length).split("-")[0]);
    if (Number.isInteger(pid) && pid > 0 && isAlive(pid)) continue;
    await rm(path.join(parent, name), { force: true });
  }
}

async function mountImage(tools: DiskTools, image: string, target: string): Promise<void> {
  await withImageLock(image, async () => {
    // Checked under the lock: a second mount would hide the first one's files.
    if ((await mountCountAt(target)) > 0) return;
    try {
      // -t: the type is named, never probed from the image's bytes.
      await run(tools.mount, ["-t", "ext4", "-o", mountOptions, image, target]);
    } catch (error) {
      throw new SandboxStartError(
        `cannot mount the private workspace's disk image ${image} at ${target}: ${commandError(error)}`,
        {
          fix: 'run `cordon doctor`; or set sandbox.disk to "unlimited" (new workspaces are then plain directories)',
          cause: error,
        },
      );
    }
  });
}

/**
 * One process at a time mounts or unmounts a workspace (across processes: an exclusively created
 * lock file naming its holder; a dead holder's lock is taken over).
 */
async function withImageLock<T>(image: string, work: () => Promise<T>): Promise<T> {
  const lock = `${image}.lock`;
  const deadline = Date.now() + 30_000;
  for (;;) {
    try {
      await writeFile(lock, String(process.pid), { flag: "wx", mode: 0o600 });
      break;
    } catch (error) {
      if (!isErrno(error, "EEXIST")) throw error;
    }
    if (await isStale(lock)) {
      await rm(lock, { force: true });
      continue;
    }
    if (Date.now() > deadline) {
      throw new SandboxStartError(`another cordon process has held ${lock} for 30 s`, {
        fix: "wait for it to finish, or delete the lock file if no cordon process runs",
      });
    }
    await sleep(50);
  }
  try {
    return await work();
  } finally {
    await rm(lock, { force: true });
  }
}

async function isStale(lock: string): Promise<boolean> {
  const [text, stats] = await Promise.all([
    readFile(lock, "utf8").catch(() => undefined),
    lstat(lock).catch(() => undefined),
  ]);
  if (text === undefined || !stats) return false;
  const pid = Number(text);
  // Empty: its holder is between creating and writing it, or died there.
  if (!Number.isInteger(pid) || pid <= 0) return Date.now() - stats.mtimeMs > 5_000;
  return !isAlive(pid);
}

async function findExecutable(name: string, directories: string[]): Promise<string | undefined> {
  for (const directory of directories) {
    const candidate = path.join(directory, name);
    if (
      await access(candidate, constants.X_OK).then(
        () => true,
        () => false,
      )
    )
      return candidate;
  }
  return undefined;
}

function commandError(error: unknown): string {
  const stderr = (error as { stderr?: unknown }).stderr;
  const text =
    typeof stderr === "string" && stderr.trim() ? stderr : String((error as Error).message);
  return text.trim().split("\n").slice(-2).join("; ");
}

function mebibytes(bytes: number): string {
  return bytes >= 1024 ** 3 && bytes % 1024 ** 3 === 0
    ? `${bytes / 1024 ** 3} GiB`
    : `${Math.round(bytes / 1024 ** 2)} MiB`;
}
