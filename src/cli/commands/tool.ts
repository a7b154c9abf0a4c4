import type { Command } from "commander";

import { ConfigError, ExitCode } from "../../common/index.js";
import type { CliContext } from "../context.js";
import { withInterrupt } from "../interrupt.js";
import { addPlanOptions, runnerFromFlags, type PlanFlags } from "../runner-flags.js";

interface ToolFlags extends PlanFlags {
  input: string;
  json?: boolean;
}

function parseInput(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch (error) {
    throw new ConfigError(`--input is not valid JSON: ${(error as Error).message}`, {
      fix: `pass a JSON object, e.g. --input '{"path":"README.md"}' (or --input - to read it from stdin)`,
    });
  }
}

/**
 * `cordon tool NAME --input JSON`: one tool call through exactly the policy and sandbox path an
 * agent's call takes — so users, scripts and tests can drive tools without a model. Exit 0 on
 * success, 1 when the tool reports an error, 2 for an input the tool's schema refuses (checked
 * before any sandbox starts), 7 when the policy refuses the tool.
 */
export function registerToolCommand(program: Command, context: CliContext): void {
  const tool = program
    .command("tool")
    .description("call one tool through the policy and the sandbox, as an agent would")
    .argument("<name>", "tool name, e.g. read, exec, apply_patch");
  addPlanOptions(tool)
    .requiredOption("--input <json>", "the tool's input as a JSON object; - reads it from stdin")
    .option("--json", "print the result as JSON")
    .action(async (name: string, flags: ToolFlags) => {
      const input = parseInput(flags.input === "-" ? await context.readStdin() : flags.input);
      const runner = runnerFromFlags(context, flags);
      const result = await withInterrupt(
        context,
        (signal) =>
          runner.callTool(name, input, { agentId: flags.agent, sessionKey: flags.session, signal }),
        () => `stopped the ${name} call; the sandbox keeps its files`,
      );
      if (flags.json) {
        context.stdout(`${JSON.stringify(result)}\n`);
      } else {
        const text = result.content.map((block) =>
          block.type === "text"
            ? block.text
            : `[${block.mediaType} image, ${block.dataBase64.length} base64 chars]`,
        );
        (result.isError ? context.stderr : context.stdout)(`${text.join("\n")}\n`);
      }
      context.exitCode = result.refused
        ? ExitCode.policy
        : result.invalidInput
          ? ExitCode.usage
          : result.isError
            ? ExitCode.internal
            : ExitCode.success;
    });
}
