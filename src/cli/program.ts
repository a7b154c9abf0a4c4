import { readFileSync } from "node:fs";
import path from "node:path";

import { Command } from "commander";

import { packageRoot } from "../common/index.js";
import { registerConfigCommand } from "./commands/config.js";
import { registerDoctorCommand } from "./commands/doctor.js";
import { registerImageCommand } from "./commands/image.js";
import { registerSandboxExplainCommand } from "./commands/sandbox-explain.js";
import { registerSessionsCommand } from "./commands/sessions.js";
import type { CliContext } from "./context.js";

function packageVersion(): string {
  const manifest = JSON.parse(readFileSync(path.join(packageRoot(), "package.json"), "utf8")) as {
    version?: unknown;
  };
  return typeof manifest.version === "string" ? manifest.version : "0.0.0";
}

export function createProgram(context: CliContext): Command {
  const program = new Command("cordon")
    .description("Sandboxed execution orchestrator for AI coding agents")
    .version(packageVersion())
    .exitOverride()
    .configureOutput({
      writeOut: (text) => context.stdout(text),
      writeErr: (text) => context.stderr(text),
    })
    .showHelpAfterError("(run `cordon --help` for usage)");
  registerDoctorCommand(program, context);
  registerImageCommand(program, context);
  registerSessionsCommand(program, context);
  registerConfigCommand(program, context);
  registerSandboxExplainCommand(program, context);
  return program;
}
