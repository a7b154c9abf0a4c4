import { Option, type Command } from "commander";

import path from "node:path";

import { stateDirectory } from "../../common/index.js";
import {
  AgentImage,
  DockerEngine,
  SandboxImage,
  agentImageNames,
  type AgentImageName,
  describeImageBuildEvent,
  type ImageBuildEvent,
  baseImageFromEnv,
} from "../../sandbox/index.js";
import type { CliContext } from "../context.js";

/** Image build progress on stderr (nothing with `--json`). */
export function progressPrinter(
  context: CliContext,
  json: boolean,
): (event: ImageBuildEvent) => void {
  return (event) => {
    const line = json ? undefined : describeImageBuildEvent(event);
    if (line !== undefined) context.stderr(`${line}\n`);
  };
}

export function registerImageCommand(program: Command, context: CliContext): void {
  const image = program.command("image").description("the sandbox image");

  image
    .command("build")
    .description("build the sandbox image from images/sandbox.Dockerfile (skipped when current)")
    .option("--force", "rebuild even when the current image exists")
    .option("--json", "print {tag} as JSON when done")
    .addOption(
      new Option(
        "--agent <name>",
        "build the agent image instead: the sandbox image with that agent CLI (`cordon help runtimes`)",
      ).choices(agentImageNames),
    )
    .action(async (options: { force?: boolean; json?: boolean; agent?: AgentImageName }) => {
      const engine = DockerEngine.fromEnv(context.env);
      await engine.ping();
      if (options.agent) {
        const tag = await new AgentImage(engine, options.agent, {
          baseImage: baseImageFromEnv(context.env),
        }).build({ onProgress: (message) => context.stderr(`· ${message}\n`) });
        context.stdout(options.json ? `${JSON.stringify({ tag })}\n` : `${tag}\n`);
        return;
      }
      const tag = await new SandboxImage(engine, {
        baseImage: baseImageFromEnv(context.env),
        logDirectory: path.join(stateDirectory(context.env), "logs"),
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
        baseImage: baseImageFromEnv(context.env),
      }).status();
      context.stdout(
        options.json
          ? `${JSON.stringify(status, null, 2)}\n`
          : `${status.tag} ${status.present ? "current" : "not built"} (base ${status.baseImage})\n`,
      );
    });
}
