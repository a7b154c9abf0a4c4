import { lstat, mkdir, readFile, readdir, realpath, stat } from "node:fs/promises";
import path from "node:path";

import type { Logger } from "../../../common/index.js";
import { createExclusive, unlinkIfPresent } from "../../../common/exclusive-file.js";
import type { SandboxSpec } from "../../spec.js";
import { fingerprintNow, handOverWorkspace, seedMarkerPath } from "../../workspace/index.js";
import type { ContainerClient, ContainerDetails, ContainerSummary } from "../client/index.js";
import { labelKeys } from "../container-options.js";
import type { ResolvedImage } from "../manager-image.js";
import type { SandboxRecords } from "../records.js";
import { poolMemberPrefix } from "./pool-shape.js";

/** A claim older than this whose member still has its pool name was left by a crashed take. */
const abandonedClaimMs = 60_000;

export interface WarmPoolOptions {
  containers: ContainerClient;
  records: SandboxRecords;
  stateDirectory: string;
  /** Removes a sandbox by name with its private workspace and record (the inventory's remove). */
  discard: (name: string) => Promise<void>;
  /** Runs work that need not hold up a take (the manager's background, which `flush` waits for). */
  later: (work: () => Promise<void>) => void;
  logger: Logger;
}

/**
 * The warm pool's members on the engine: started containers of one shape waiting, each with an
 * empty private workspace of its own, for a sandbox to take one (docs/pool.md). Docker is the
 * source of truth for what exists; a member is taken by claiming it (a file created exclusively in
 * the state directory, so two processes never take one member) and renaming it, and its workspace,
 * to the sandbox's. Making members is the manager's (an acquire of a member spec); this class
 * finds, takes and counts them.
 */
export class WarmPool {
  readonly #containers: ContainerClient;
  readonly #records: SandboxRecords;
  readonly #claims: string;
  readonly #logger: Logger;
  readonly #stateDirectory: string;
  readonly #discard: (name: string) => Promise<void>;
  readonly #later: (work: () => Promise<void>) => void;

  constructor(options: WarmPoolOptions) {
    this.#containers = options.containers;
    this.#records = options.records;
    this.#stateDirectory = options.stateDirectory;
    this.#claims = path.join(options.stateDirectory, "pool-claims");
    this.#discard = options.discard;
    this.#later = options.later;
    this.#logger = options.logger;
  }

  /** Running members of `spec`'s shape made from `image`, oldest first, claimed or not. */
  async members(
    spec: SandboxSpec,
    shape: string,
    image: ResolvedImage,
  ): Promise<ContainerSummary[]> {
    const prefix = poolMemberPrefix(spec, shape);
    const found = await this.#containers.list({
      labels: [
        `${labelKeys.managed}=true`,
        `${labelKeys.home}=${this.#stateDirectory}`,
        `${labelKeys.pool}=${shape}`,
      ],
      runningOnly: true,
    });
    return found
      .filter(
        (member) =>
          member.name.startsWith(prefix) &&
          member.imageId === image.id &&
          member.labels[labelKeys.image] === image.reference,
      )
      .sort((a, b) => a.createdAtMs - b.createdAtMs);
  }

  /** Members not claimed by anyone: what a refill counts. */
  async available(spec: SandboxSpec, shape: string, image: ResolvedImage): Promise<number> {
    const claimed = new Set(await readdir(this.#claims).catch(() => [] as string[]));
    const members = await this.members(spec, shape, image);
    return members.filter((member) => !claimed.has(member.name)).length;
  }

  /**
   * Takes a member for `spec`: its container becomes `spec.containerName` and its workspace
   * `spec.privateWorkspace`, and the record says whose it is. Undefined when none can be taken
   * (none waits, every one is claimed, or the scope has a container or a workspace of its own
   * meanwhile): the caller then creates the sandbox as without a pool.
   */
  async take(
    spec: SandboxSpec,
    shape: string,
    image: ResolvedImage,
  ): Promise<ContainerDetails | undefined> {
    // A scope with a container or a workspace of its own keeps it (its work is there).
    if (await this.#containers.inspect(spec.containerName)) return undefined;
    if (spec.privateWorkspace && (await exists(spec.privateWorkspace))) return undefined;
    await mkdir(this.#claims, { recursive: true, mode: 0o700 });
    for (const member of await this.members(spec, shape, image)) {
      const claim = path.join(this.#claims, member.name);
      if (!(await createExclusive(claim, `${process.pid}\n`))) continue;
      try {
        const copy = await this.#seededCopy(member, spec);
        if (copy === "stale") {
          // Seeded before the workspace changed: no later take can use it either.
          await this.#discard(member.name);
          continue;
        }
        if (copy === "unknown") continue;
        return await this.#handOver(member, spec);
      } finally {
        await unlinkIfPresent(claim);
      }
    }
    return undefined;
  }

  /**
   * Whether a member's seeded copy is what seeding now would copy: "fresh" when the agent
   * workspace still has the fingerprint taken before the member's copy was made (nothing a seed
   * reads changed since), "stale" when it changed, "unknown" when the copy has none (a workspace
   * whose repository lies elsewhere). A member of an unseeded spec is always "fresh".
   */
  async #seededCopy(
    member: ContainerSummary,
    spec: SandboxSpec,
  ): Promise<"fresh" | "stale" | "unknown"> {
    if (!spec.seed || !spec.privateWorkspace) return "fresh";
    const memberWorkspace = member.labels[labelKeys.privateWorkspace];
    if (!memberWorkspace) return "unknown";
    const marker = await readSeedMarker(memberWorkspace);
    if (!marker?.sourceFingerprint) return "unknown";
    const now = await fingerprintNow({
      sourceRoot: await realpath(spec.agentWorkspace),
      gitDir: path.join(memberWorkspace, ".git"),
      exclude: [
        await realpath(this.#stateDirectory),
        await realpath(path.dirname(spec.privateWorkspace)),
      ],
    }).catch((error: unknown) => {
      this.#logger.debug({ err: error }, "cannot fingerprint the agent workspace");
      return undefined;
    });
    if (now === undefined) return "unknown";
    return now === marker.sourceFingerprint ? "fresh" : "stale";
  }

  /** Moves a claimed member to `spec`; undefined when `spec`'s scope got there first. */
  async #handOver(
    member: ContainerSummary,
    spec: SandboxSpec,
  ): Promise<ContainerDetails | undefined> {
    const memberWorkspace = member.labels[labelKeys.privateWorkspace];
    if (spec.privateWorkspace) {
      const handedOver =
        memberWorkspace && (await handOverWorkspace(memberWorkspace, spec.privateWorkspace));
      if (!handedOver) return undefined;
      const clearOldPath = handedOver.clearOldPath;
      if (clearOldPath) this.#later(clearOldPath);
    }
    const now = new Date().toISOString();
    // The record before the rename: from the moment the name is the sandbox's, its identity is.
    const previous = await this.#records.read(spec.containerName);
    await this.#records.write({
      version: 1,
      containerName: spec.containerName,
      containerId: member.id,
      scopeKey: spec.scopeKey,
      configHash: spec.configHash,
      wantedConfigHash: spec.configHash,
      wantedImage: member.labels[labelKeys.image],
      ...(spec.privateWorkspace ? { privateWorkspace: spec.privateWorkspace } : {}),
      createdAt: now,
      lastUsedAt: now,
      pooled: {
        member: member.name,
        scope: spec.scope,
        agentId: spec.agentId,
        sessionKey: spec.sessionKey,
      },
    });
    if (!(await this.#containers.rename(member.id, spec.containerName))) {
      // Another process made this sandbox meanwhile. Its workspace is the one just moved in
      // (same shape, so the same as it would have made); the member, without one, goes.
      this.#logger.debug({ member: member.name }, "lost the sandbox name to another process");
      if (previous) await this.#records.write(previous);
      else await this.#records.remove(spec.containerName);
      await this.#discard(member.name);
      return undefined;
    }
    await this.#records.remove(member.name);
    return this.#containers.inspect(member.id);
  }

  /**
   * Claims left by a process that died between claiming and renaming a member: the member is
   * unusable (its workspace may be half moved), so it goes with its claim.
   */
  async removeAbandonedClaims(): Promise<string[]> {
    const removed: string[] = [];
    for (const name of await readdir(this.#claims).catch(() => [] as string[])) {
      const claim = path.join(this.#claims, name);
      const stats = await stat(claim).catch(() => undefined);
      if (!stats || Date.now() - stats.mtimeMs < abandonedClaimMs) continue;
      const member = await this.#containers.inspect(name);
      if (member && member.labels[labelKeys.pool] !== undefined) {
        await this.#discard(name);
        removed.push(name);
      }
      await unlinkIfPresent(claim);
    }
    return removed;
  }
}

/** A member's seed marker: cordon's own file beside its workspace. */
async function readSeedMarker(
  workspace: string,
): Promise<{ sourceFingerprint?: string | undefined } | undefined> {
  try {
    const parsed: unknown = JSON.parse(await readFile(seedMarkerPath(workspace), "utf8"));
    return typeof parsed === "object" && parsed !== null ? parsed : undefined;
  } catch {
    return undefined;
  }
}

function exists(file: string): Promise<boolean> {
  return lstat(file).then(
    () => true,
    () => false,
  );
}
