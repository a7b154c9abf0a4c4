import { tmpdir } from "node:os";
import path from "node:path";

import { AbortedError, ImageError, throwIfAborted } from "../../common/index.js";
import type { DockerEngine } from "./engine.js";
import { describeImageBuildEvent } from "./image-build-progress.js";
import { SandboxImage, type SandboxImageOptions } from "./sandbox-image.js";
import { ProjectImages } from "./project-image/index.js";
import type { DockerSettings, ProjectImageSpec } from "../spec.js";
import { AgentImage, type AgentImageName } from "./agent-image.js";

export interface ImageResolverOptions {
  engine: DockerEngine;
  /** Use this tag for the built-in image instead of computing it (tests, embedders). */
  builtinImage?: string | undefined;
  /** How to build the built-in image when it is missing. */
  imageOptions?: SandboxImageOptions | undefined;
  /** cordon's state directory: project image logs, context snapshots and preflight marks. */
  stateDirectory?: string | undefined;
}

/** An image that exists on the engine. */
export interface ResolvedImage {
  /** What containers are created from and labelled with (a tag). */
  reference: string;
  /** The image id the reference names now; a container made from another id is stale. */
  id: string;
  /**
   * Environment the image's source asks for (a devcontainer.json's containerEnv and remoteEnv),
   * under the sandbox's own: part of the tag, so a change is a new container.
   */
  env?: Record<string, string> | undefined;
  /** What the user should know about the image (ignored devcontainer fields). */
  notes?: string[] | undefined;
}

/**
 * Turns `spec.docker.image` into an image that exists on the engine, building or looking up
 * exactly what the policy chose: the built-in sandbox image or a runtime's agent image (built,
 * with progress, when missing), the project's (built when its inputs changed), or the configured
 * one (never pulled or built behind the user's back: a missing one is an error naming the
 * command). Answers are cached per process, but for the project image's.
 */
export class ImageResolver {
  private readonly resolved = new Map<string, Promise<ResolvedImage>>();
  private readonly projects: ProjectImages;
  /** The last resolve of each project image (and user), so builds of one project never overlap. */
  private readonly projectQueue = new Map<string, Promise<ResolvedImage>>();

  constructor(private readonly options: ImageResolverOptions) {
    this.projects = new ProjectImages({
      engine: options.engine,
      stateDirectory: options.stateDirectory ?? path.join(tmpdir(), "cordon"),
      ensureDefaultImage: () => this.resolve(undefined),
    });
  }

  /**
   * The image a sandbox's settings name. The project image is looked at on every call (a
   * Dockerfile edit is a new tag); its preflight runs as the sandbox user.
   */
  async resolveFor(
    docker: Pick<DockerSettings, "image" | "user">,
    options: { signal?: AbortSignal | undefined; onOutput?: (text: string) => void } = {},
  ): Promise<ResolvedImage> {
    const image = docker.image;
    switch (image.source) {
      case "project":
        return this.resolveProject(image.project, docker.user, options);
      case "config":
        return this.resolve(image.reference, options);
      case "builtin":
        return this.resolve(undefined, options);
      case "runtime":
        return this.cached(`runtime:${image.runtime}`, options, () =>
          this.agentImage(image.runtime, options.onOutput),
        );
    }
  }

  /**
   * The image `resolveFor` would give, only if it is on the engine now: nothing is built or
   * pulled, and a missing one is an `ImageError` naming it and the command that makes it. For a
   * reader that must not start a build (`cordon checkpoints` counting changed files).
   */
  async lookupFor(
    docker: Pick<DockerSettings, "image" | "user">,
    options: { signal?: AbortSignal | undefined } = {},
  ): Promise<ResolvedImage> {
    const image = docker.image;
    switch (image.source) {
      case "project":
        return untilAborted(
          this.projects.resolve(image.project, {
            user: docker.user,
            signal: options.signal,
            build: false,
          }),
          options.signal,
        );
      case "config":
        return this.resolve(image.reference, options);
      case "builtin":
        return untilAborted(this.existingBuiltin(), options.signal);
      case "runtime":
        return untilAborted(this.existingAgentImage(image.runtime), options.signal);
    }
  }

  /** The configured image (which must exist), or the built-in one when undefined. */
  async resolve(
    configured: string | undefined,
    options: { signal?: AbortSignal | undefined; onOutput?: (text: string) => void } = {},
  ): Promise<ResolvedImage> {
    return this.cached(configured ?? "", options, () =>
      configured === undefined
        ? this.builtin({ onOutput: options.onOutput })
        : this.existing(configured, {
            what: `the sandbox image ${configured} (sandbox.docker.image)`,
            fix: `run \`docker pull ${configured}\` (or build it), or remove sandbox.docker.image to use cordon's own image (\`cordon image build\`)`,
          }),
    );
  }

  private resolveProject(
    project: ProjectImageSpec,
    user: string,
    options: { signal?: AbortSignal | undefined; onOutput?: (text: string) => void },
  ): Promise<ResolvedImage> {
    const key = `${project.file}|${user}`;
    // One build at a time per project in this process; a later call looks again (inputs may
    // have changed in between), which costs a read and a hash, not a build.
    const previous = this.projectQueue.get(key) ?? Promise.resolve();
    const next = previous
      .catch(() => undefined)
      .then(() => this.projects.resolve(project, { user, onOutput: options.onOutput }));
    this.projectQueue.set(key, next);
    return untilAborted(next, options.signal);
  }

  private cached(
    key: string,
    options: { signal?: AbortSignal | undefined },
    make: () => Promise<ResolvedImage>,
  ): Promise<ResolvedImage> {
    let pending = this.resolved.get(key);
    if (!pending) {
      // Shared by every acquire waiting for this image, so no one caller's signal stops it (a
      // build keeps going for the others); each caller stops waiting on its own signal below.
      pending = make();
      this.resolved.set(key, pending);
      // Failures are not cached: the next acquire tries again (e.g. after `cordon image build`).
      pending.catch(() => this.resolved.delete(key));
    }
    return untilAborted(pending, options.signal);
  }

  /** A runtime's agent image: the sandbox image with the agent CLI, each built when missing. */
  private async agentImage(
    runtime: AgentImageName,
    onOutput: ((text: string) => void) | undefined,
  ): Promise<ResolvedImage> {
    const image = new AgentImage(this.options.engine, runtime, this.options.imageOptions);
    const tag = await image.build(onOutput ? { onProgress: onOutput } : {});
    return this.existing(tag, agentImageMissing(runtime, tag));
  }

  /** The agent image of `runtime` the current recipe names, when it is on the engine. */
  private async existingAgentImage(runtime: AgentImageName): Promise<ResolvedImage> {
    const tag = await new AgentImage(this.options.engine, runtime, this.options.imageOptions).tag();
    return this.existing(tag, agentImageMissing(runtime, tag));
  }

  /** The built-in image the current recipe names, when it is on the engine. */
  private async existingBuiltin(): Promise<ResolvedImage> {
    const tag =
      this.options.builtinImage ??
      (await new SandboxImage(this.options.engine, this.options.imageOptions).status()).tag;
    return this.existing(tag, builtinMissing(tag));
  }

  private async existing(
    reference: string,
    missing: { what: string; fix: string },
  ): Promise<ResolvedImage> {
    const info = await this.options.engine.images.inspect(reference);
    if (!info) {
      throw new ImageError(`${missing.what} is not on the Docker engine`, { fix: missing.fix });
    }
    return { reference, id: info.id };
  }

  private async builtin(options: {
    onOutput?: ((text: string) => void) | undefined;
  }): Promise<ResolvedImage> {
    const tag = this.options.builtinImage;
    if (tag !== undefined) return this.existing(tag, builtinMissing(tag));
    const image = new SandboxImage(this.options.engine, this.options.imageOptions);
    const status = await image.status();
    if (!status.present) {
      options.onOutput?.(
        `building the sandbox image ${status.tag} (first use; \`cordon image build\` does this ahead of time)`,
      );
      await image.build({
        onEvent: (event) => {
          const line = event.type === "base" ? undefined : describeImageBuildEvent(event);
          if (line !== undefined) options.onOutput?.(line);
        },
      });
    }
    return this.existing(status.tag, builtinMissing(status.tag));
  }
}

/** What a missing built-in image is called, and the command that builds it. */
function builtinMissing(tag: string): { what: string; fix: string } {
  return { what: `the sandbox image ${tag}`, fix: "run `cordon image build`" };
}

/** What a missing agent image is called, and the command that builds it. */
function agentImageMissing(runtime: AgentImageName, tag: string): { what: string; fix: string } {
  return {
    what: `the ${runtime} agent image ${tag}`,
    fix: `run \`cordon image build --agent ${runtime}\``,
  };
}

/** `work`, or an `AbortedError` as soon as `signal` fires (the work itself goes on). */
function untilAborted<T>(work: Promise<T>, signal: AbortSignal | undefined): Promise<T> {
  if (!signal) return work;
  throwIfAborted(signal, "waiting for the sandbox image");
  return new Promise<T>((resolve, reject) => {
    const onAbort = (): void => {
      reject(
        new AbortedError("waiting for the sandbox image was aborted", { cause: signal.reason }),
      );
    };
    signal.addEventListener("abort", onAbort, { once: true });
    work.then(resolve, reject).finally(() => signal.removeEventListener("abort", onAbort));
  });
}
