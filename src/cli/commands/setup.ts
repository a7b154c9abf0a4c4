import type { Command } from "commander";

import { ExitCode } from "../../common/index.js";
import { DockerEngine, SandboxImage, baseImageFromEnv } from "../../sandbox/index.js";
import type { CliContext } from "../context.js";
import { formatDoctorReport, runDoctor } from "./doctor.js";
import { progressPrinter } from "./image.js";

/**
 * `cordon setup`: for an installed package what scripts/setup.sh does for a clone — a Docker
 * engine that answers, the sandbox image built from the Dockerfile the package ships — then the
 * doctor's checks, so one command says whether `cordon run` will work here.
 */
export function registerSetupCommand(program: Command, context: CliContext): void {
  program
    .command("setup")
    .description(
      "get this machine ready: check the Docker engine, build the sandbox image (skipped when current), then run the doctor's checks",
    )
    .option("--force", "rebuild the sandbox image even when it is current")
    .action(async (options: { force?: boolean }) => {
      const engine = DockerEngine.fromEnv(context.env);
      const info = await engine.ping();
      context.stderr(`Docker engine ${info.serverVersion} (API ${info.apiVersion})\n`);
      await new SandboxImage(engine, { baseImage: baseImageFromEnv(context.env) }).build({
        force: options.force,
        onEvent: progressPrinter(context, false),
      });
      const report = await runDoctor(context.env);
      context.stdout(formatDoctorReport(report, context.paint.stdout));
      context.exitCode = report.ok ? ExitCode.success : ExitCode.sandbox;
    });
}
