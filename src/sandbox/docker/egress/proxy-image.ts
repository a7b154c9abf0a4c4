import { createHash } from "node:crypto";
import { readFile } from "node:fs/promises";
import path from "node:path";
import { Readable } from "node:stream";

import { pack } from "tar-stream";

import { ImageError, packageRoot } from "../../../common/index.js";
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
    const output: string[] = [];
    let failure: string | undefined;
    await this.engine.images.build(
      Readable.from(context),
      {
        tag,
        buildArgs: { BASE_IMAGE: base.baseImage },
        labels: { "cordon.image": "egress-proxy", "cordon.image.base-id": base.baseImageId },
      },
      (event) => {
        // A failed RUN arrives as an error event on a stream that still ends normally.
        if (event.error) failure ??= event.error.trim();
        if (event.stream?.trim()) output.push(event.stream.trim());
      },
    );
    if (failure) {
      throw new ImageError(`the egress proxy image build failed: ${failure}`, {
        fix: `the last lines of the build: ${output.slice(-5).join(" | ")}; Debian's mirror must be reachable from the default bridge`,
      });
    }
    return tag;
  }

  private async exists(tag: string): Promise<boolean> {
    return (await this.engine.images.inspect(tag)) !== undefined;
  }
}
