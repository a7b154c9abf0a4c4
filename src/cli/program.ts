import { readFileSync } from "node:fs";
import path from "node:path";

import { Command } from "commander";

import { packageRoot } from "../common/index.js";
import { registerChangesCommands } from "./commands/changes.js";
import { registerConfigCommand } from "./commands/config.js";
import { registerDoctorCommand } from "./commands/doctor.js";
import { registerExecCommand } from "./commands/exec.js";
import { registerFixTestsCommand } from "./commands/fix-tests.js";
import { registerImageCommand } from "./commands/image.js";
import { registerSandboxCommands } from "./commands/sandbox-command.js";
import { registerSandboxExplainCommand } from "./commands/sandbox-explain.js";
import { registerRunCommand } from "./commands/run.js";
import { registerSessionsCommand } from "./commands/sessions.js";
import { registerToolCommand } from "./commands/tool.js";
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
  registerRunCommand(program, context);
  registerExecCommand(program, context);
  registerToolCommand(program, context);
  registerChangesCommands(program, context);
  registerFixTestsCommand(program, context);
  registerDoctorCommand(program, context);
  registerImageCommand(program, context);
  registerSessionsCommand(program, context);
  registerSandboxCommands(program, context);
  registerSandboxExplainCommand(program, context);
  registerConfigCommand(program, context);
  return program;
}
