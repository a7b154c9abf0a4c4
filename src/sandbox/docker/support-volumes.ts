import { createHash, randomBytes } from "node:crypto";
import { Readable } from "node:stream";

import { pack } from "tar-stream";

import type { ContainerClient, VolumeClient, VolumeDetails } from "./client/index.js";

/** One file of a support volume. */
export interface SupportFile {
  name: string;
  content: Buffer;
  /** e.g. 0o755 for the executor, 0o644 for the hosts file. */
  mode: number;
}

/** Labels of a support volume's marker (see `SupportVolumes`). */
const markerLabels = {
  kind: "cordon.support",
  /** The volume that holds the files. */
  data: "cordon.support.data",
  /** Its mountpoint on the engine's host. */
  mountpoint: "cordon.support.mountpoint",
} as const;

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
 */
export class SupportVolumes {
  readonly #ready = new Map<string, Promise<VolumeDetails>>();

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
      ready = this.#ensure(kind, marker, files, image);
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
    const found = await this.#dataOf(marker);
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
        [markerLabels.kind]: kind,
        [markerLabels.data]: data.name,
        [markerLabels.mountpoint]: data.mountpoint,
      },
    });
    const winner = await this.clients.volumes.inspect(marker);
    if (winner?.labels[markerLabels.data] === data.name) return data;
    await this.clients.volumes.remove(data.name).catch(() => undefined);
    const theirs = await this.#dataOf(marker);
    if (!theirs) throw new Error(`the support volume ${marker} names no volume`);
    return theirs;
  }

  /** The data volume the marker names, when both exist; a marker whose data is gone is removed. */
  async #dataOf(marker: string): Promise<VolumeDetails | undefined> {
    const found = await this.clients.volumes.inspect(marker);
    const name = found?.labels[markerLabels.data];
    if (!found || !name) return undefined;
    const data = await this.clients.volumes.inspect(name);
    if (data) return data;
    // Someone removed the files (`docker volume prune`): start again.
    await this.clients.volumes.remove(marker).catch(() => undefined);
    return undefined;
  }

  async #fill(
    kind: string,
    name: string,
    files: readonly SupportFile[],
    image: string,
  ): Promise<VolumeDetails> {
    await this.clients.volumes.create({ name, labels: { [markerLabels.kind]: `${kind}-data` } });
    const data = await this.clients.volumes.inspect(name);
    if (!data) throw new Error(`the volume ${name} was removed as it was made`);
    const filler = `${name}-fill`;
    try {
      const id = await this.clients.containers.create({
        name: filler,
        Image: image,
        Entrypoint: ["true"],
        Cmd: [],
        Labels: { [markerLabels.kind]: `${kind}-fill` },
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
