import { createHash } from "node:crypto";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { Readable } from "node:stream";
import { stripVTControlCharacters } from "node:util";

import { pack } from "tar-stream";

import { ImageError, packageRoot, throwIfAborted } from "../../common/index.js";
import type { DockerEngine } from "./engine.js";
import { fetchRuntimePackages } from "./image-runtime-packages.js";
import { SandboxImage, type SandboxImageOptions } from "./sandbox-image.js";

/** Agent programs cordon has an image recipe for (images/<name>.Dockerfile and .json). */
export const agentImageNames = ["claude-code"] as const;
export type AgentImageName = (typeof agentImageNames)[number];

/**
 * cordon's sandbox image with an agent CLI added (images/claude-code.Dockerfile): the CLI comes
 * from the npm registry through the host's npm, checked against the sha512 pinned beside the
 * recipe, so the build runs no install script and needs no network. Tagged by a hash of the
 * recipe, its pins and the sandbox image's tag; built only when that tag is missing.
 */
export class AgentImage {
  private readonly sandboxImage: SandboxImage;
  private readonly dockerfile: string;
  private readonly pins: string;
  readonly repository: string;

  constructor(
    private readonly engine: DockerEngine,
    readonly agent: AgentImageName,
    imageOptions: SandboxImageOptions = {},
  ) {
    this.sandboxImage = new SandboxImage(engine, imageOptions);
    this.dockerfile = path.join(packageRoot(), "images", `${agent}.Dockerfile`);
    this.pins = path.join(packageRoot(), "images", `${agent}.json`);
    this.repository = `cordon-agent-${agent}`;
  }

  /** The tag the current recipe builds, without building anything. */
  async tag(): Promise<string> {
    const sandbox = await this.sandboxImage.status();
    return this.tagOver(sandbox.tag);
  }

  /** Builds the sandbox image and then this one, each only when missing; returns the tag. */
  async build(
    options: { signal?: AbortSignal | undefined; onProgress?: (message: string) => void } = {},
  ): Promise<string> {
    const progress = options.onProgress ?? (() => undefined);
    const sandboxTag = await this.sandboxImage.build({
      signal: options.signal,
      onEvent: (event) => {
        if (event.type === "step") progress(`sandbox image step ${event.step}/${event.total}`);
      },
    });
    const tag = await this.tagOver(sandboxTag);
    if (await this.exists(tag)) return tag;
    throwIfAborted(options.signal, "agent image build");
    progress(
      `building the ${this.agent} agent image ${tag} (fetching the CLI with the host's npm)`,
    );
    const downloads = await mkdtemp(path.join(tmpdir(), "cordon-agent-image-"));
    try {
      const { architecture } = await this.engine.system.describe();
      const files = await fetchRuntimePackages(
        this.pins,
        architecture || "x86_64",
        downloads,
        options.signal,
      );
      const context = pack();
      context.entry({ name: "Dockerfile", mode: 0o644 }, await readFile(this.dockerfile));
      for (const file of files) {
        context.entry({ name: file.contextName, mode: 0o644 }, await readFile(file.path));
      }
      context.finalize();
      let failure: string | undefined;
      let output = "";
      await this.engine.images.build(
        Readable.from(context),
        {
          tag,
          buildArgs: { SANDBOX_IMAGE: sandboxTag },
          labels: { "cordon.image": `agent-${this.agent}`, "cordon.image.sandbox": sandboxTag },
          signal: options.signal,
        },
        (event) => {
          if (event.error) failure ??= stripVTControlCharacters(event.error).trim();
          output = (output + stripVTControlCharacters(event.stream ?? "")).slice(-4000);
          const step = /^Step (\d+\/\d+) : (.*)$/m.exec(event.stream ?? "");
          if (step) progress(`${this.agent} agent image step ${step[1]}: ${step[2]?.trim() ?? ""}`);
        },
      );
      if (failure) {
        throw new ImageError(`the ${this.agent} agent image build failed: ${failure}`, {
          fix: `its last output: ${output.trim().split("\n").slice(-5).join(" | ")}`,
        });
      }
    } finally {
      await rm(downloads, { recursive: true, force: true });
    }
    return tag;
  }

  private async tagOver(sandboxTag: string): Promise<string> {
    const read = (file: string) =>
      readFile(file).catch((error: unknown) => {
        throw new ImageError(`cannot read ${file}`, { cause: error });
      });
    const hash = createHash("sha256")
      .update(`sandbox:${sandboxTag}\n`)
      .update(await read(this.dockerfile))
      .update("\n--- pins ---\n")
      .update(await read(this.pins))
      .digest("hex");
    return `${this.repository}:${hash.slice(0, 12)}`;
  }

  private async exists(reference: string): Promise<boolean> {
    return (await this.engine.images.inspect(reference)) !== undefined;
  }
}
