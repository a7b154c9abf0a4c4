import { createHash } from "node:crypto";
import { createWriteStream, type WriteStream } from "node:fs";
import { mkdir, mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { Readable } from "node:stream";

import { pack } from "tar-stream";

import { ImageError, packageRoot, throwIfAborted } from "../../common/index.js";
import type { DockerEngine } from "./engine.js";
import { buildImageLogged } from "./image-build-stream.js";
import { fetchRuntimePackages } from "./image-runtime-packages.js";

/** The repository every built sandbox image is tagged under. */
export const sandboxImageRepository = "cordon-sandbox";
/** Where a registry is reachable, the base of the sandbox image. */
export const officialBaseImage = "debian:bookworm-slim";
/** Where none is, the debootstrapped base a clone's scripts/setup.sh imports. */
export const localBaseImage = "cordon-base:bookworm";

/**
 * The base image the environment asks for (`CORDON_BASE_IMAGE`), read here only, so every
 * command — `run` as much as `image`, `doctor` and `sandbox list` — builds from the same base.
 */
export function baseImageFromEnv(env: NodeJS.ProcessEnv): string | undefined {
  return env["CORDON_BASE_IMAGE"] || undefined;
}

/** Bump when the way images are built changes, so every old tag becomes stale. */
const buildRecipeVersion = "2";

export interface SandboxImageOptions {
  /** The base image to build from; default: the official base, else the local debootstrap base. */
  baseImage?: string | undefined;
  /** The Dockerfile; default: images/sandbox.Dockerfile of this package. */
  dockerfilePath?: string | undefined;
  /**
   * The pinned npm registry packages the Dockerfile copies in (Node.js, npm); default:
   * images/node-runtime.json beside the Dockerfile.
   */
  runtimePinsPath?: string | undefined;
  /** Where the full build log is written; default: the system temporary directory. */
  logDirectory?: string | undefined;
}

/** What `status()` finds. */
export interface SandboxImageStatus {
  /** The tag the current inputs produce, e.g. `cordon-sandbox:1a2b3c4d5e6f`. */
  tag: string;
  /** Whether an image with that tag exists: present means current. */
  present: boolean;
  /** The base image the tag was computed from, and its id. */
  baseImage: string;
  baseImageId: string;
  /** Other cordon-sandbox tags on the engine (older inputs). */
  staleTags: string[];
}

export type ImageBuildEvent =
  | { type: "base"; image: string; source: "local" | "pulled" }
  | { type: "skipped"; tag: string }
  /** The build started; every line of its output goes to `logFile`. */
  | { type: "log"; tag: string; logFile: string }
  /** A pinned runtime package was fetched and its integrity checked. */
  | { type: "fetched"; spec: string }
  /** The engine started a Dockerfile instruction (`Step 3/9 : RUN ...`), so long into the build. */
  | { type: "step"; step: number; total: number; instruction: string; elapsedMs?: number }
  /** The latest line of a step still running after a while (at most one every few seconds). */
  | { type: "step-output"; step: number; line: string; elapsedMs: number }
  | { type: "built"; tag: string; durationMs: number };

export interface ImageBuildOptions {
  /** Rebuild even when an image with the current tag exists. */
  force?: boolean | undefined;
  onEvent?: ((event: ImageBuildEvent) => void) | undefined;
  signal?: AbortSignal | undefined;
}

interface ResolvedBase {
  image: string;
  id: string;
  source: "local" | "pulled";
}

const setupFix =
  "make a registry with debian:bookworm-slim reachable and run `cordon setup`, or set CORDON_BASE_IMAGE to a Debian-based image you have";

/**
 * The default sandbox image: built from images/sandbox.Dockerfile, tagged by a hash of the
 * Dockerfile and the base image's id, and never rebuilt while those are unchanged.
 */
export class SandboxImage {
  private readonly dockerfilePath: string;
  private readonly runtimePinsPath: string;

  constructor(
    private readonly engine: DockerEngine,
    private readonly options: SandboxImageOptions = {},
  ) {
    this.dockerfilePath =
      options.dockerfilePath ?? path.join(packageRoot(), "images", "sandbox.Dockerfile");
    this.runtimePinsPath =
      options.runtimePinsPath ?? path.join(path.dirname(this.dockerfilePath), "node-runtime.json");
  }

  /** The current tag and whether it exists. Pulls nothing; fails when no base is available. */
  async status(): Promise<SandboxImageStatus> {
    const base = await this.resolveBase({ pull: false });
    const tag = await this.tagFor(base);
    const tags = await this.engine.images.tags(sandboxImageRepository);
    return {
      tag,
      present: tags.includes(tag),
      baseImage: base.image,
      baseImageId: base.id,
      staleTags: tags.filter((t) => t !== tag && !t.endsWith(":latest")),
    };
  }

  /** Builds the image unless the current tag exists (or `force`); returns the tag. */
  async build(options: ImageBuildOptions = {}): Promise<string> {
    const emit = options.onEvent ?? (() => undefined);
    const base = await this.resolveBase({ pull: true, signal: options.signal });
    emit({ type: "base", image: base.image, source: base.source });
    const tag = await this.tagFor(base);
    if (!options.force && (await this.exists(tag))) {
      emit({ type: "skipped", tag });
      return tag;
    }
    throwIfAborted(options.signal, "image build");
    const started = Date.now();
    const logFile = path.join(
      this.options.logDirectory ?? tmpdir(),
      `image-build-${tag.slice(tag.indexOf(":") + 1)}.log`,
    );
    await mkdir(path.dirname(logFile), { recursive: true });
    const log = createWriteStream(logFile);
    emit({ type: "log", tag, logFile });
    const downloads = await mkdtemp(path.join(tmpdir(), "cordon-image-inputs-"));
    try {
      const context = await this.buildContext(downloads, emit, options.signal);
      await this.runBuild(context, tag, base, log, emit, options.signal);
    } catch (error) {
      if (error instanceof ImageError) {
        log.write(`\n${error.message}\n`);
        throw new ImageError(`${error.message} (full log: ${logFile})`, {
          fix: error.fix ?? "`cordon image build --force` retries",
          cause: error.cause,
        });
      }
      throw error;
    } finally {
      await new Promise((resolve) => log.end(resolve));
      await rm(downloads, { recursive: true, force: true });
    }
    // `latest` is a convenience for people running the image by hand; cordon itself always uses
    // the hashed tag.
    await this.engine.images.tag(tag, sandboxImageRepository, "latest");
    emit({ type: "built", tag, durationMs: Date.now() - started });
    return tag;
  }

  /** The Dockerfile and the pinned runtime packages, fetched and checked, as a tar stream. */
  private async buildContext(
    downloads: string,
    emit: (event: ImageBuildEvent) => void,
    signal: AbortSignal | undefined,
  ): Promise<Readable> {
    const { architecture } = await this.engine.system.describe();
    const files = await fetchRuntimePackages(
      this.runtimePinsPath,
      architecture || "x86_64",
      downloads,
      signal,
    );
    const context = pack();
    context.entry({ name: "Dockerfile", mode: 0o644 }, await readFile(this.dockerfilePath));
    for (const file of files) {
      emit({ type: "fetched", spec: file.spec });
      context.entry({ name: file.contextName, mode: 0o644 }, await readFile(file.path));
    }
    context.finalize();
    // tar-stream packs are streamx streams; Readable.from makes a Node stream of one.
    return Readable.from(context);
  }

  private async runBuild(
    context: Readable,
    tag: string,
    base: ResolvedBase,
    log: WriteStream,
    emit: (event: ImageBuildEvent) => void,
    signal: AbortSignal | undefined,
  ): Promise<void> {
    await buildImageLogged(
      this.engine.images,
      context,
      {
        tag,
        buildArgs: { BASE_IMAGE: base.image },
        labels: {
          "cordon.image": "sandbox",
          "cordon.image.base": base.image,
          "cordon.image.base-id": base.id,
        },
        signal,
      },
      {
        log,
        emit,
        what: "the sandbox image",
        fix: "read the build log; `cordon image build --force` retries",
      },
    );
  }

  /** The tag is a hash of every build input: recipe version, base image id, Dockerfile, pins. */
  private async tagFor(base: ResolvedBase): Promise<string> {
    const read = (file: string) =>
      readFile(file).catch((error: unknown) => {
        throw new ImageError(`cannot read ${file}`, { cause: error });
      });
    const hash = createHash("sha256")
      .update(`cordon-image-recipe:${buildRecipeVersion}\n`)
      .update(`base-id:${base.id}\n`)
      .update(await read(this.dockerfilePath))
      .update("\n--- runtime pins ---\n")
      .update(await read(this.runtimePinsPath))
      .digest("hex");
    return `${sandboxImageRepository}:${hash.slice(0, 12)}`;
  }

  private async exists(reference: string): Promise<boolean> {
    return (await this.inspectId(reference)) !== undefined;
  }

  private async inspectId(reference: string): Promise<string | undefined> {
    return (await this.engine.images.inspect(reference))?.id;
  }

  private async resolveBase(options: {
    pull: boolean;
    signal?: AbortSignal | undefined;
  }): Promise<ResolvedBase> {
    const candidates = this.options.baseImage
      ? [this.options.baseImage]
      : [officialBaseImage, localBaseImage];
    for (const image of candidates) {
      const id = await this.inspectId(image);
      if (id) return { image, id, source: "local" };
    }
    const wanted = this.options.baseImage ?? officialBaseImage;
    if (options.pull) {
      const id = await this.tryPull(wanted, options.signal);
      if (id) return { image: wanted, id, source: "pulled" };
    }
    throw new ImageError(
      `no base image for the sandbox image: ${candidates.join(" and ")} ${candidates.length > 1 ? "are" : "is"} not present${options.pull ? ` and ${wanted} cannot be pulled` : ""}`,
      {
        fix: this.options.baseImage
          ? `pull or build ${this.options.baseImage}, or unset CORDON_BASE_IMAGE to use the default base`
          : setupFix,
      },
    );
  }

  private async tryPull(image: string, signal?: AbortSignal): Promise<string | undefined> {
    try {
      await this.engine.images.pull(image, { signal });
      return await this.inspectId(image);
    } catch {
      // No registry (the normal case on isolated machines): the caller falls back or explains.
      return undefined;
    }
  }
}
