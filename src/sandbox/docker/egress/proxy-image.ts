import { createHash } from "node:crypto";
import { readFile } from "node:fs/promises";
import path from "node:path";
import { Readable } from "node:stream";

import { pack } from "tar-stream";

import { ImageError, packageRoot } from "../../../common/index.js";
import { dockerStatusOf, toSandboxError } from "../docker-errors.js";
import type { DockerEngine } from "../engine.js";
import { SandboxImage, type SandboxImageOptions } from "../sandbox-image.js";

/** The repository the proxy image is tagged under. */
export const egressProxyImageRepository = "cordon-egress-proxy";

const dockerfilePath = (): string => path.join(packageRoot(), "images", "egress-proxy.Dockerfile");

/**
 * The egress proxy's image (images/egress-proxy.Dockerfile: Debian's squid), built on the base the
 * sandbox image uses (`SandboxImage` decides which: the official Debian image, else the local
 * debootstrap one), tagged by a hash of the Dockerfile and that base's id, built once per tag.
 * Concurrent callers in one process share one build.
 */
export class EgressProxyImage {
  private pending: Promise<string> | undefined;

  constructor(
    private readonly engine: DockerEngine,
    private readonly options: Pick<SandboxImageOptions, "baseImage"> = {},
  ) {}

  /** The tag, built first when missing; `onOutput` gets one line when a build starts. */
  resolve(onOutput?: (text: string) => void): Promise<string> {
    this.pending ??= this.ensure(onOutput);
    // A failed build is tried again next time.
    this.pending.catch(() => (this.pending = undefined));
    return this.pending;
  }

  private async ensure(onOutput?: (text: string) => void): Promise<string> {
    const base = await new SandboxImage(this.engine, this.options).status();
    const dockerfile = await readFile(dockerfilePath());
    const hash = createHash("sha256")
      .update(`base-id:${base.baseImageId}\n`)
      .update(dockerfile)
      .digest("hex");
    const tag = `${egressProxyImageRepository}:${hash.slice(0, 12)}`;
    if (await this.exists(tag)) return tag;
    onOutput?.(`building the egress proxy image ${tag} (first use)`);
    const context = pack();
    context.entry({ name: "Dockerfile", mode: 0o644 }, dockerfile);
    context.finalize();
    let stream: NodeJS.ReadableStream;
    try {
      stream = await this.engine.client.buildImage(Readable.from(context), {
        t: tag,
        buildargs: { BASE_IMAGE: base.baseImage },
        labels: { "cordon.image": "egress-proxy", "cordon.image.base-id": base.baseImageId },
        rm: true,
        forcerm: true,
      });
    } catch (error) {
      throw toSandboxError(error, "start the egress proxy image build");
    }
    const output: string[] = [];
    await new Promise<void>((resolve, reject) => {
      let failure: string | undefined;
      this.engine.client.modem.followProgress(
        stream,
        (error) => {
          if (error) reject(toSandboxError(error, "build the egress proxy image"));
          else if (failure) {
            reject(
              new ImageError(`the egress proxy image build failed: ${failure}`, {
                fix: `the last lines of the build: ${output.slice(-5).join(" | ")}; Debian's mirror must be reachable from the default bridge`,
              }),
            );
          } else resolve();
        },
        (event: { stream?: string; error?: string; errorDetail?: { message?: string } }) => {
          // A failed RUN arrives as an error event on a stream that still ends normally.
          const message = event.errorDetail?.message ?? event.error;
          if (message) failure ??= message.trim();
          if (event.stream?.trim()) output.push(event.stream.trim());
        },
      );
    });
    return tag;
  }

  private async exists(tag: string): Promise<boolean> {
    try {
      await this.engine.client.getImage(tag).inspect();
      return true;
    } catch (error) {
      if (dockerStatusOf(error) === 404) return false;
      throw toSandboxError(error, `inspect the image ${tag}`);
    }
  }
}
