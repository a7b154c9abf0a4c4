import { ImageError, throwIfAborted } from "../../common/index.js";
import { dockerStatusOf, toSandboxError } from "./docker-errors.js";
import type { DockerEngine } from "./engine.js";
import { SandboxImage, type SandboxImageOptions } from "./sandbox-image.js";

export interface ImageResolverOptions {
  engine: DockerEngine;
  /** Use this tag for the built-in image instead of computing it (tests, embedders). */
  builtinImage?: string | undefined;
  /** How to build the built-in image when it is missing. */
  imageOptions?: SandboxImageOptions | undefined;
}

/**
 * Turns `spec.docker.image` into an image that exists on the engine: the built-in sandbox image
 * (built, with progress, when missing) or the configured one (never pulled or built behind the
 * user's back: a missing one is an error naming the command). Answers are cached per process.
 */
export class ImageResolver {
  private readonly resolved = new Map<string, Promise<string>>();

  constructor(private readonly options: ImageResolverOptions) {}

  async resolve(
    configured: string | undefined,
    options: { signal?: AbortSignal | undefined; onOutput?: (text: string) => void } = {},
  ): Promise<string> {
    const key = configured ?? "";
    let pending = this.resolved.get(key);
    if (!pending) {
      pending = configured === undefined ? this.builtin(options) : this.custom(configured);
      this.resolved.set(key, pending);
      // Failures are not cached: the next acquire tries again (e.g. after `cordon image build`).
      pending.catch(() => this.resolved.delete(key));
    }
    return pending;
  }

  private async custom(reference: string): Promise<string> {
    try {
      await this.options.engine.client.getImage(reference).inspect();
      return reference;
    } catch (error) {
      if (dockerStatusOf(error) === 404) {
        throw new ImageError(
          `the sandbox image ${reference} (sandbox.docker.image) is not on the Docker engine`,
          {
            fix: `run \`docker pull ${reference}\` (or build it), or remove sandbox.docker.image to use cordon's own image (\`cordon image build\`)`,
          },
        );
      }
      throw toSandboxError(error, `inspect image ${reference}`);
    }
  }

  private async builtin(options: {
    signal?: AbortSignal | undefined;
    onOutput?: (text: string) => void;
  }): Promise<string> {
    const tag = this.options.builtinImage;
    if (tag !== undefined) return this.custom(tag);
    const image = new SandboxImage(this.options.engine, this.options.imageOptions);
    const status = await image.status();
    if (status.present) return status.tag;
    throwIfAborted(options.signal, "sandbox image build");
    options.onOutput?.(
      `building the sandbox image ${status.tag} (first use; \`cordon image build\` does this ahead of time)`,
    );
    return image.build({
      signal: options.signal,
      onEvent: (event) => {
        if (event.type === "output" && event.text.trim() !== "")
          options.onOutput?.(event.text.trimEnd());
        if (event.type === "built") options.onOutput?.(`built ${event.tag}`);
      },
    });
  }
}
