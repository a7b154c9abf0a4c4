import type { Command } from "commander";

import { DockerEngine, SandboxImage, type ImageBuildEvent } from "../../sandbox/index.js";
import type { CliContext } from "../context.js";

function progressPrinter(context: CliContext, json: boolean): (event: ImageBuildEvent) => void {
  return (event) => {
    if (json) return;
    switch (event.type) {
      case "base":
        context.stderr(`base image: ${event.image} (${event.source})\n`);
        break;
      case "skipped":
        context.stderr(`${event.tag} is current; nothing to build (--force rebuilds)\n`);
        break;
      case "output":
        context.stderr(event.text.endsWith("\n") ? event.text : `${event.text}\n`);
        break;
      case "built":
        context.stderr(`built ${event.tag} in ${(event.durationMs / 1000).toFixed(1)}s\n`);
        break;
    }
  };
}

export function registerImageCommand(program: Command, context: CliContext): void {
  const image = program.command("image").description("the sandbox image");

  image
    .command("build")
    .description("build the sandbox image from images/sandbox.Dockerfile (skipped when current)")
    .option("--force", "rebuild even when the current image exists")
    .option("--json", "print {tag} as JSON when done")
    .action(async (options: { force?: boolean; json?: boolean }) => {
      const engine = DockerEngine.fromEnv(context.env);
      await engine.ping();
      const tag = await new SandboxImage(engine, {
        baseImage: context.env["CORDON_BASE_IMAGE"],
      }).build({
        force: options.force,
        onEvent: progressPrinter(context, options.json ?? false),
      });
      context.stdout(options.json ? `${JSON.stringify({ tag })}\n` : `${tag}\n`);
    });

  image
    .command("status")
    .description("show the current sandbox image tag and whether it is built")
    .option("--json", "print as JSON")
    .action(async (options: { json?: boolean }) => {
      const engine = DockerEngine.fromEnv(context.env);
      await engine.ping();
      const status = await new SandboxImage(engine, {
        baseImage: context.env["CORDON_BASE_IMAGE"],
      }).status();
      context.stdout(
        options.json
          ? `${JSON.stringify(status, null, 2)}\n`
          : `${status.tag} ${status.present ? "current" : "not built"} (base ${status.baseImage})\n`,
      );
    });
}
