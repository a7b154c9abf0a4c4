import { createHash, randomBytes } from "node:crypto";
import { Readable } from "node:stream";

import { pack } from "tar-stream";

import { SandboxStartError } from "../../common/index.js";
import type {
  ContainerClient,
  CreateContainerRequest,
  VolumeClient,
  VolumeDetails,
} from "./client/index.js";

/** One file of a support volume. */
export interface SupportFile {
  name: string;
  content: Buffer;
  /** e.g. 0o755 for the executor, 0o644 for the hosts file. */
  mode: number;
}

/**
 * Labels of support volumes (see `SupportVolumes`): `kind` is on all of them — the kind on a
 * marker, `<kind>-data` on a data volume, `<kind>-fill` on the container that fills one.
 */
export const supportLabels = {
  kind: "cordon.support",
  /** The volume that holds the files. */
  data: "cordon.support.data",
  /** Its mountpoint on the engine's host. */
  mountpoint: "cordon.support.mountpoint",
} as const;

/** The `cordon.support` label of a data volume of `kind`. */
export const dataLabel = (kind: string): string => `${kind}-data`;

/** The `cordon.support` label of the container that fills a data volume of `kind`. */
export const fillLabel = (kind: string): string => `${kind}-fill`;

/**
 * Creates a container from a request asked for again on each attempt; undefined when the name is
 * taken (as `ContainerClient.create`). `SupportVolumes.createContainer` is the one that checks
 * the support volumes the container mounts.
 */
export type CreateContainerFrom = (
  makeRequest: () => Promise<CreateContainerRequest>,
) => Promise<string | undefined>;

/** How often a container is made again when its support volumes were removed as it was made. */
const createAttempts = 3;

/** Where the filling container mounts the data volume; it is never started. */
const fillTarget = "/fill";

/**
 * What a sandbox needs from cordon besides its image — the resident executor's binary, the hosts
 * file of a sandbox with no network — kept on the engine as named volumes, so they travel with the
 * engine as the container does and nothing is bound from this host's filesystem (an engine
 * elsewhere could not see it).
 *
 * Content-addressed and made once per engine: `cordon-<kind>-<digest>` is a marker volume whose
 * labels name the data volume holding the files. The data volume is filled first — through a
 * container that mounts it and is never started (the engine extracts an archive into a volume of
 * a stopped container) — and only then is the marker created, so a marker never names a volume
 * still being filled: a process that finds it uses it. Two processes filling at once each fill a
 * volume of their own; the first marker wins and the other removes its volume. A data volume is
 * mounted read-only by every sandbox: nothing in one can change what another runs.
 *
 * `cordon sandbox prune` removes those no container mounts (support-volume-sweep.ts), so a volume
 * found here may be gone by the time a container is made from it — and Docker then silently makes
 * an empty volume of that name. `createContainer` closes that race: once a container mounts a
 * volume the engine refuses to remove it, so a volume checked after the create stays good.
 */
export class SupportVolumes {
  readonly #ready = new Map<string, Promise<VolumeDetails>>();
  /** Data volumes this object handed out, by name: their marker and mountpoint. */
  readonly #handedOut = new Map<string, { marker: string; mountpoint: string; kind: string }>();

  constructor(private readonly clients: { containers: ContainerClient; volumes: VolumeClient }) {}

  /**
   * The data volume holding `files`, made on first use on this engine from `image` (any image on
   * the engine: the container that fills it never runs).
   */
  ensure(kind: string, files: readonly SupportFile[], image: string): Promise<VolumeDetails> {
    const digest = createHash("sha256");
    for (const file of files) {
      digest.update(`${file.name}\0${file.mode}\0${file.content.length}\0`).update(file.content);
    }
    const marker = `cordon-${kind}-${digest.digest("hex").slice(0, 16)}`;
    let ready = this.#ready.get(marker);
    if (!ready) {
      ready = this.#ensure(kind, marker, files, image).then((data) => {
        this.#handedOut.set(data.name, { marker, mountpoint: data.mountpoint, kind });
        return data;
      });
      // A failure is not kept: the next sandbox tries again.
      ready.catch(() => this.#ready.delete(marker));
      this.#ready.set(marker, ready);
    }
    return ready;
  }

  async #ensure(
    kind: string,
    marker: string,
    files: readonly SupportFile[],
    image: string,
  ): Promise<VolumeDetails> {
    const found = await this.#dataOf(kind, marker);
    if (found) return found;
    const data = await this.#fill(
      kind,
      `${marker}-${randomBytes(4).toString("hex")}`,
      files,
      image,
    );
    // Created only now, so it never names a volume being filled; an existing one keeps its labels.
    await this.clients.volumes.create({
      name: marker,
      labels: {
        [supportLabels.kind]: kind,
        [supportLabels.data]: data.name,
        [supportLabels.mountpoint]: data.mountpoint,
      },
    });
    const winner = await this.clients.volumes.inspect(marker);
    if (winner?.labels[supportLabels.data] === data.name) return data;
    await this.clients.volumes.remove(data.name).catch(() => undefined);
    const theirs = await this.#dataOf(kind, marker);
    if (!theirs) throw new Error(`the support volume ${marker} names no volume`);
    return theirs;
  }

  /**
   * Creates the container `makeRequest` describes, making sure every support volume it mounts is
   * still the filled one: a volume removed (by a prune) before the create is either a bind source
   * that does not exist (the create fails) or a volume Docker made anew, empty. Either way the
   * container is removed, the volumes are made again, and the request is asked for again.
   * Undefined when the name is taken (as `ContainerClient.create`).
   */
  async createContainer(
    makeRequest: () => Promise<CreateContainerRequest>,
  ): Promise<string | undefined> {
    for (let attempt = 1; ; attempt += 1) {
      const request = await makeRequest();
      const used = this.#mountedBy(request);
      let id: string | undefined;
      try {
        id = await this.clients.containers.create(request);
      } catch (error) {
        if (attempt < createAttempts && (await this.#gone(used)).length > 0) continue;
        throw error;
      }
      if (id === undefined) return undefined;
      // Mounted now, the engine keeps them: what is good here stays good.
      const gone = await this.#gone(used);
      if (gone.length === 0) return id;
      await this.clients.containers.remove(id, request.name);
      await this.#removeImpostors(gone);
      if (attempt >= createAttempts) {
        throw new SandboxStartError(
          `the support volumes ${gone.join(", ")} were removed each time a container was made with them`,
          {
            fix: "something removes Docker volumes in a loop (`docker volume prune`?); stop it and retry",
          },
        );
      }
    }
  }

  /** The data volumes this object handed out that `request` mounts (or binds a file of). */
  #mountedBy(request: CreateContainerRequest): string[] {
    const used = new Set<string>();
    for (const mount of request.HostConfig?.Mounts ?? []) {
      if (mount.Type === "volume" && this.#handedOut.has(mount.Source)) used.add(mount.Source);
      if (mount.Type !== "bind") continue;
      for (const [name, { mountpoint }] of this.#handedOut) {
        if (mount.Source.startsWith(`${mountpoint}/`)) used.add(name);
      }
    }
    return [...used];
  }

  /** Those of `names` that are not a filled data volume any more; they are forgotten. */
  async #gone(names: readonly string[]): Promise<string[]> {
    const gone: string[] = [];
    for (const name of names) {
      const given = this.#handedOut.get(name);
      const found = await this.clients.volumes.inspect(name);
      if (given && found?.labels[supportLabels.kind] === dataLabel(given.kind)) continue;
      gone.push(name);
      this.#handedOut.delete(name);
      if (given) this.#ready.delete(given.marker);
    }
    return gone;
  }

  /** Removes volumes Docker made empty in place of removed support volumes (never a filled one). */
  async #removeImpostors(names: readonly string[]): Promise<void> {
    for (const name of names) {
      const found = await this.clients.volumes.inspect(name);
      if (!found || found.labels[supportLabels.kind] !== undefined) continue;
      // Another container made in the same moment may hold it: the next prune takes it then.
      await this.clients.volumes.remove(name).catch(() => undefined);
    }
  }

  /**
   * The data volume the marker names, when both exist and it is filled; a marker whose data is
   * gone (or is an empty volume Docker made in its place) is removed.
   */
  async #dataOf(kind: string, marker: string): Promise<VolumeDetails | undefined> {
    const found = await this.clients.volumes.inspect(marker);
    const name = found?.labels[supportLabels.data];
    if (!found || !name) return undefined;
    const data = await this.clients.volumes.inspect(name);
    if (data?.labels[supportLabels.kind] === dataLabel(kind)) return data;
    // Someone removed the files (`cordon sandbox prune`, `docker volume prune`): start again.
    await this.clients.volumes.remove(marker).catch(() => undefined);
    return undefined;
  }

  async #fill(
    kind: string,
    name: string,
    files: readonly SupportFile[],
    image: string,
  ): Promise<VolumeDetails> {
    await this.clients.volumes.create({ name, labels: { [supportLabels.kind]: dataLabel(kind) } });
    const data = await this.clients.volumes.inspect(name);
    if (!data) throw new Error(`the volume ${name} was removed as it was made`);
    const filler = `${name}-fill`;
    try {
      const id = await this.clients.containers.create({
        name: filler,
        Image: image,
        Entrypoint: ["true"],
        Cmd: [],
        Labels: { [supportLabels.kind]: fillLabel(kind) },
        NetworkDisabled: true,
        HostConfig: {
          NetworkMode: "none",
          Mounts: [{ Type: "volume", Source: name, Target: fillTarget, ReadOnly: false }],
        },
      });
      if (id === undefined) throw new Error(`the container ${filler} exists already`);
      try {
        await this.clients.containers.putArchive(
          id,
          fillTarget,
          Readable.from([await archiveOf(files)]),
        );
      } finally {
        await this.clients.containers.remove(id, filler);
      }
    } catch (error) {
      await this.clients.volumes.remove(name).catch(() => undefined);
      throw error;
    }
    return data;
  }
}

/** A tar of `files`, owned by root: the sandbox user can read and run them, never change them. */
async function archiveOf(files: readonly SupportFile[]): Promise<Buffer> {
  const archive = pack();
  const chunks: Buffer[] = [];
  archive.on("data", (chunk: unknown) => chunks.push(chunk as Buffer));
  const ended = new Promise<void>((resolve, reject) => {
    archive.on("end", resolve);
    archive.on("error", reject);
  });
  for (const file of files) {
    archive.entry(
      { name: file.name, mode: file.mode, uid: 0, gid: 0, mtime: new Date(0) },
      file.content,
    );
  }
  archive.finalize();
  await ended;
  return Buffer.concat(chunks);
}
