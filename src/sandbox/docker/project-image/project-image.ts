import { createHash } from "node:crypto";
import { createWriteStream } from "node:fs";
import { mkdir, mkdtemp, rm } from "node:fs/promises";
import path from "node:path";
import { Readable } from "node:stream";

import { pack } from "tar-stream";

import { ImageError, throwIfAborted } from "../../../common/index.js";
import type { ProjectImageSpec } from "../../spec.js";
import type { ImageBuildRequest } from "../client/index.js";
import type { DockerEngine } from "../engine.js";
import { describeImageBuildEvent } from "../image-build-progress.js";
import { buildImageLogged } from "../image-build-stream.js";
import { sandboxImageRepository } from "../sandbox-image.js";
import { ContextSnapshot, contextDockerfileName, readWorkspaceFile } from "./build-context.js";
import { parseDevcontainer, type Devcontainer } from "./devcontainer.js";
import { dockerfileBaseImages } from "./dockerfile-bases.js";
import { preflightProjectImage } from "./preflight.js";

/** The repository every project image is tagged under: `cordon-project-<slug>:<hash>`. */
export const projectImageRepositoryPrefix = "cordon-project-";

/** Bump when what goes into a project image's tag changes, so every old tag becomes stale. */
const projectRecipeVersion = "1";
/** On a project image once cordon's last layer is on it: only such an image counts as built. */
const finishedLabel = "cordon.image.finished";
/** Where the last layer puts the image's PATH back for login shells. */
const imagePathScript = "/etc/profile.d/zz-cordon-image-path.sh";

/** A project image that exists on the engine and passed the preflight. */
export interface ResolvedProjectImage {
  /** `cordon-project-<slug>:<hash of inputs>`. */
  reference: string;
  id: string;
  /** The devcontainer.json's containerEnv and remoteEnv; the sandbox's own settings win. */
  env: Record<string, string>;
  /** What the user should know: ignored devcontainer fields, a user that was not mapped. */
  notes: string[];
}

export interface ProjectImagesOptions {
  engine: DockerEngine;
  /** cordon's state directory: build logs go to `logs/`, context snapshots and preflight marks to `project-images/`. */
  stateDirectory: string;
  /** Makes cordon's own image exist (building it when missing); asked when a Dockerfile builds FROM it. */
  ensureDefaultImage: () => Promise<unknown>;
}

export interface ResolveProjectImageOptions {
  /** The sandbox user ("uid:gid"): the preflight runs as it. */
  user: string;
  signal?: AbortSignal | undefined;
  onOutput?: ((text: string) => void) | undefined;
  /**
   * False: only look the image up. Nothing is built or pulled (not the image, not its bases):
   * one that is not on the engine is an `ImageError` saying so. Default true.
   */
  build?: boolean | undefined;
}

/** What is built: from a Dockerfile with a context, or an image used as it is. */
type Recipe =
  | {
      kind: "build";
      dockerfile: Buffer;
      /** Where it came from (for messages). */
      dockerfilePath: string;
      context: string;
      args: Record<string, string>;
      target?: string | undefined;
    }
  | { kind: "image"; image: string };

/**
 * Builds the image a project asks for (docs/images.md) and keeps it current: the tag is a hash of
 * every input (the Dockerfile's bytes, the context as sent, build arguments and target, the base
 * images' ids, the devcontainer environment), so an unchanged project never rebuilds and any
 * change does. Every new image passes a preflight before a sandbox runs from it.
 *
 * Only a trusted config can get here (config/loosening-keys.ts): the build runs the repository's
 * code with Docker's default bridge network, as `docker build` would. The host only reads the
 * workspace's own files for it, never through a link (build-context.ts).
 */
export class ProjectImages {
  private readonly work: string;
  private readonly logs: string;

  constructor(private readonly options: ProjectImagesOptions) {
    this.work = path.join(options.stateDirectory, "project-images");
    this.logs = path.join(options.stateDirectory, "logs");
  }

  async resolve(
    spec: ProjectImageSpec,
    options: ResolveProjectImageOptions,
  ): Promise<ResolvedProjectImage> {
    const notes: string[] = [];
    const what = path.relative(spec.workspace, spec.file);
    let devcontainer: Devcontainer | undefined;
    let recipe: Recipe;
    if (spec.source === "devcontainer") {
      const text = await readWorkspaceFile(spec.workspace, spec.file, "the devcontainer.json");
      devcontainer = parseDevcontainer(spec.file, text.toString("utf8"));
      notes.push(...devcontainerNotes(what, devcontainer));
      recipe = devcontainer.build
        ? {
            kind: "build",
            dockerfilePath: devcontainer.build.dockerfile,
            dockerfile: await readWorkspaceFile(
              spec.workspace,
              devcontainer.build.dockerfile,
              `the Dockerfile ${what} names`,
            ),
            context: devcontainer.build.context,
            args: devcontainer.build.args,
            target: devcontainer.build.target,
          }
        : { kind: "image", image: devcontainer.image! };
    } else {
      recipe = {
        kind: "build",
        dockerfilePath: spec.file,
        dockerfile: await readWorkspaceFile(spec.workspace, spec.file, "the Dockerfile"),
        context: spec.context ?? path.dirname(spec.file),
        args: { ...spec.args },
      };
    }
    const env = devcontainer?.env ?? {};
    const bases =
      recipe.kind === "image"
        ? [recipe.image]
        : dockerfileBaseImages(recipe.dockerfile.toString("utf8"), recipe.args);
    const baseIds: string[] = [];
    const build = options.build ?? true;
    for (const base of bases) {
      baseIds.push(`${base}@${await this.baseImageId(base, what, { build })}`);
    }

    await mkdir(this.work, { recursive: true });
    const snapshotDirectory = await mkdtemp(path.join(this.work, "context-"));
    try {
      const sorted = (record: Record<string, string>) => Object.entries(record).sort();
      const hash = createHash("sha256").update(
        JSON.stringify({
          recipe: projectRecipeVersion,
          source: spec.source,
          bases: baseIds,
          env: sorted(env),
          ...(recipe.kind === "build"
            ? { args: sorted(recipe.args), target: recipe.target ?? null }
            : { image: recipe.image }),
        }),
      );
      let snapshot: ContextSnapshot | undefined;
      if (recipe.kind === "build") {
        hash.update("\n--- Dockerfile ---\n").update(recipe.dockerfile);
        hash.update("\n--- context ---\n");
        snapshot = await ContextSnapshot.take({
          workspace: spec.workspace,
          context: recipe.context,
          into: snapshotDirectory,
          signal: options.signal,
        });
        await snapshot.hashInto(hash);
        if (snapshot.skipped.length > 0) {
          notes.push(
            `left out of the build context of ${what}: ${snapshot.skipped.map((s) => `${s.path} (${s.reason})`).join(", ")}`,
          );
        }
      }
      const reference = `${projectImageRepositoryPrefix}${slugOf(spec.workspace)}:${hash.digest("hex").slice(0, 12)}`;
      let id = await this.finishedId(reference);
      if (id === undefined && !build) {
        throw new ImageError(`the project image ${reference} (from ${what}) is not built`, {
          fix: "a run or `cordon exec` in this workspace builds it",
        });
      }
      if (id === undefined) {
        throwIfAborted(options.signal, "project image build");
        await this.build(reference, recipe, snapshot, what, options);
        id = await this.finishedId(reference);
        if (id === undefined) {
          throw new ImageError(`the project image ${reference} is missing right after its build`, {
            fix: "run the command again",
          });
        }
      }
      const preflight = await preflightProjectImage({
        engine: this.options.engine,
        reference,
        imageId: id,
        user: options.user,
        userName: devcontainer?.user?.name,
        markDirectory: path.join(this.work, "preflight"),
        source: `${what} (${spec.configKey})`,
        signal: options.signal,
      });
      if (devcontainer?.user && preflight.userIds !== undefined) {
        const note = userNote(devcontainer.user, preflight.userIds, options.user, what);
        if (note) notes.push(note);
      }
      return { reference, id, env, notes };
    } finally {
      await rm(snapshotDirectory, { recursive: true, force: true });
    }
  }

  /**
   * Builds the project's Dockerfile (when there is one) and then cordon's last layer on top,
   * both into `reference`; the engine's output goes to one log file.
   */
  private async build(
    reference: string,
    recipe: Recipe,
    snapshot: ContextSnapshot | undefined,
    what: string,
    options: ResolveProjectImageOptions,
  ): Promise<void> {
    const say = options.onOutput ?? (() => undefined);
    const started = Date.now();
    await mkdir(this.logs, { recursive: true });
    const logFile = path.join(
      this.logs,
      `image-build-${reference.replace(/[^a-z0-9.-]+/g, "-")}.log`,
    );
    const log = createWriteStream(logFile);
    say(`building the project image from ${what}`);
    say(describeImageBuildEvent({ type: "log", tag: reference, logFile })!);
    const emit = (event: Parameters<typeof describeImageBuildEvent>[0]): void => {
      const line = describeImageBuildEvent(event);
      if (line !== undefined) say(line);
    };
    const build = (context: Readable, request: ImageBuildRequest, quiet: boolean) =>
      buildImageLogged(this.options.engine.images, context, request, {
        log,
        emit: quiet ? () => undefined : emit,
        what: `the project image ${reference} (from ${what})`,
        fix: `fix ${what} and run again (the full log is ${logFile})`,
      });
    const common = { tag: reference, signal: options.signal };
    try {
      let from = recipe.kind === "image" ? recipe.image : reference;
      if (recipe.kind === "build") {
        await build(
          snapshot!.tar(recipe.dockerfile),
          {
            ...common,
            dockerfile: contextDockerfileName,
            buildArgs: recipe.args,
            target: recipe.target,
            labels: { "cordon.image": "project" },
          },
          false,
        );
        from = reference;
      }
      const last = await lastLayerContext(this.options.engine, from);
      await build(
        last,
        { ...common, labels: { "cordon.image": "project", [finishedLabel]: "1" } },
        true,
      );
    } catch (error) {
      if (error instanceof ImageError) log.write(`\n${error.message}\n`);
      throw error;
    } finally {
      await new Promise((resolve) => log.end(resolve));
    }
    emit({ type: "built", tag: reference, durationMs: Date.now() - started });
  }

  /** The id `reference` names when it is a finished project image (cordon's last layer on). */
  private async finishedId(reference: string): Promise<string | undefined> {
    const info = await this.options.engine.images.inspect(reference);
    return info?.labels[finishedLabel] === "1" ? info.id : undefined;
  }

  /** The id of a base image, building cordon's own or pulling another when it is missing. */
  private async baseImageId(
    image: string,
    what: string,
    options: { build: boolean },
  ): Promise<string> {
    if (options.build && repositoryOf(image) === sandboxImageRepository) {
      await this.options.ensureDefaultImage();
    }
    const present = await this.inspectId(image);
    if (present) return present;
    if (!options.build) {
      throw new ImageError(`the base image ${image} of ${what} is not on the Docker engine`, {
        fix: "a run or `cordon exec` in this workspace builds or pulls it",
      });
    }
    try {
      await this.options.engine.images.pull(image);
    } catch {
      // No registry, or no such image: said below.
    }
    const pulled = await this.inspectId(image);
    if (pulled) return pulled;
    throw new ImageError(
      `the base image ${image} of ${what} is not on the Docker engine and cannot be pulled`,
      {
        fix: `build or pull ${image}, or start ${what} FROM ${sandboxImageRepository}:latest (cordon's own image; see cordon help images)`,
      },
    );
  }

  private async inspectId(reference: string): Promise<string | undefined> {
    return (await this.options.engine.images.inspect(reference))?.id;
  }
}

/** The devcontainer fields cordon left aside, in one note each kind. */
function devcontainerNotes(what: string, devcontainer: Devcontainer): string[] {
  const notes: string[] = [];
  if (devcontainer.ignored.length > 0) {
    notes.push(
      `${what}: ${devcontainer.ignored.join(", ")} ${devcontainer.ignored.length === 1 ? "is" : "are"} ignored (a sandbox takes only the image, build, containerEnv, remoteEnv and the user; lifecycle commands: use --setup-cmd)`,
    );
  }
  if (devcontainer.droppedEnv.length > 0) {
    notes.push(
      `${what}: ${devcontainer.droppedEnv.join(", ")} ${devcontainer.droppedEnv.length === 1 ? "uses" : "use"} \${…} variables and ${devcontainer.droppedEnv.length === 1 ? "was" : "were"} left out (cordon passes nothing of the host's environment into the sandbox; write the value, or set it in sandbox.docker.env)`,
    );
  }
  return notes;
}

/** Whether the devcontainer's user is the sandbox user; a note naming the fix when not. */
function userNote(
  user: NonNullable<Devcontainer["user"]>,
  ids: string,
  sandboxUser: string,
  what: string,
): string | undefined {
  const label = `${what}: ${user.key} "${user.name}"`;
  if (ids === "unknown") {
    return `${label} does not exist in the image; the sandbox runs as ${sandboxUser} (sandbox.docker.user)`;
  }
  const [uid, gid] = ids.split(":");
  if (uid === "0") {
    return `${label} is root; cordon never runs a sandbox as root, it runs as ${sandboxUser} (sandbox.docker.user)`;
  }
  const [sandboxUid] = sandboxUser.split(":");
  if (uid === sandboxUid) return undefined;
  return `${label} is ${ids} in the image but the sandbox runs as ${sandboxUser}; set sandbox.docker.user to "${uid}:${gid}" to run as that user`;
}

/** `cordon-project-<slug>`: the workspace's name, as Docker allows in a repository name. */
function slugOf(workspace: string): string {
  const slug = path
    .basename(workspace)
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, "-")
    .replace(/^-+|-+$/g, "")
    .slice(0, 40)
    .replace(/-+$/, "");
  return slug || "workspace";
}

/** `cordon-sandbox` of `cordon-sandbox:latest`, `registry:5000/x` of `registry:5000/x:tag`. */
function repositoryOf(image: string): string {
  const withoutDigest = image.split("@")[0] ?? image;
  const slash = withoutDigest.lastIndexOf("/");
  const colon = withoutDigest.lastIndexOf(":");
  return colon > slash ? withoutDigest.slice(0, colon) : withoutDigest;
}

/**
 * The context of cordon's last layer on a project image: the sandbox runs every command with
 * `bash -lc`, and a login shell's /etc/profile replaces PATH, so the image's own PATH (its `ENV
 * PATH`, e.g. a virtualenv's bin) would be lost. A profile.d script puts it first again. COPY
 * only: nothing runs, and the image needs no shell for it.
 */
async function lastLayerContext(engine: DockerEngine, from: string): Promise<Readable> {
  const info = await engine.images.inspect(from);
  if (!info) {
    throw new ImageError(`the image ${from} is gone from the Docker engine`, {
      fix: "run again: the project image is built anew",
    });
  }
  const imagePath = info.env.find((entry) => entry.startsWith("PATH="))?.slice("PATH=".length);
  const archive = pack();
  const lines = [`FROM ${info.id}`];
  if (imagePath) {
    lines.push(`COPY image-path.sh ${imagePathScript}`);
    const quoted = `'${imagePath.replace(/'/g, `'\\''`)}'`;
    archive.entry(
      { name: "image-path.sh", mode: 0o644 },
      [
        "# Written by cordon (docs/images.md): the image's own PATH, which /etc/profile replaced.",
        `PATH=${quoted}:"$PATH"`,
        "export PATH",
        "",
      ].join("\n"),
    );
  }
  archive.entry({ name: "Dockerfile", mode: 0o644 }, `${lines.join("\n")}\n`);
  archive.finalize();
  return Readable.from(archive);
}
