import { readFileSync } from "node:fs";
import path from "node:path";

import { Command } from "commander";

import { ConfigError, exitCodeMeanings } from "../common/errors.js";
import { packageRoot } from "../common/paths.js";
import { closedPipeExitCode } from "./closed-pipe.js";
import type { CliContext } from "./context.js";

/** Adds a module's commands (with their options and actions) to the program. */
type RegisterCommands = (program: Command, context: CliContext) => void;

/**
 * A module of top-level commands: their one-line summaries, for `cordon --help`, and the module
 * itself, imported only when one of its commands runs. Command modules pull in Docker, the model
 * SDK and the config schema; loading them all made `cordon --version` take a second.
 */
interface CommandModule {
  commands: Readonly<Record<string, string>>;
  load: () => Promise<RegisterCommands[]>;
}

const commandModules: readonly CommandModule[] = [
  {
    commands: { run: "run an agent on a task in its sandbox" },
    load: async () => [(await import("./commands/run.js")).registerRunCommand],
  },
  {
    commands: { exec: "run one command in the sandbox a run would get" },
    load: async () => [(await import("./commands/exec.js")).registerExecCommand],
  },
  {
    commands: { "port-forward": "reach a server in the sandbox from this host's loopback" },
    load: async () => [(await import("./commands/port-forward.js")).registerPortForwardCommand],
  },
  {
    commands: { tool: "call one tool through the policy, as an agent would" },
    load: async () => [(await import("./commands/tool.js")).registerToolCommand],
  },
  {
    commands: { mcp: "serve a session's sandboxed tools to an MCP client (Claude Code, Cursor…)" },
    load: async () => [(await import("./commands/mcp.js")).registerMcpCommand],
  },
  {
    commands: {
      diff: "the changes a session made to its private copy, as a git patch",
      apply: "apply a session's changes to the workspace",
    },
    load: async () => [(await import("./commands/changes.js")).registerChangesCommands],
  },
  {
    commands: {
      checkpoint: "record the state of a session's private copy",
      checkpoints: "list a session copy's checkpoints",
      rollback: "return a session's private copy to a checkpoint (shell effects too)",
    },
    load: async () => [(await import("./commands/checkpoint.js")).registerCheckpointCommands],
  },
  {
    commands: { fork: "new sessions whose private copies start as a session's is now" },
    load: async () => [(await import("./commands/fork.js")).registerForkCommand],
  },
  {
    commands: { "fix-tests": "let an agent fix failing tests, verified on a clean copy" },
    load: async () => [(await import("./commands/fix-tests.js")).registerFixTestsCommand],
  },
  {
    commands: { doctor: "check the engine, the image, the state and the config" },
    load: async () => [(await import("./commands/doctor.js")).registerDoctorCommand],
  },
  {
    commands: { setup: "get this machine ready: Docker engine, sandbox image, checks" },
    load: async () => [(await import("./commands/setup.js")).registerSetupCommand],
  },
  {
    commands: { image: "the sandbox image" },
    load: async () => [(await import("./commands/image.js")).registerImageCommand],
  },
  {
    commands: { sessions: "agent sessions (JSONL transcripts)" },
    load: async () => [(await import("./commands/sessions.js")).registerSessionsCommand],
  },
  {
    commands: { ps: "runs in progress, their sandboxes and what they are doing" },
    load: async () => [(await import("./commands/ps.js")).registerPsCommand],
  },
  {
    commands: { top: "a live view of runs and sandboxes: CPU, memory, disk, egress, doing" },
    load: async () => [(await import("./commands/top.js")).registerTopCommand],
  },
  {
    commands: { logs: "a session's run events; -f follows a run in progress" },
    load: async () => [(await import("./commands/logs.js")).registerLogsCommand],
  },
  {
    commands: { sandbox: "the sandboxes cordon manages: list, explain, rm, prune" },
    load: async () => [
      (await import("./commands/sandbox-command.js")).registerSandboxCommands,
      (await import("./commands/sandbox-explain.js")).registerSandboxExplainCommand,
    ],
  },
  {
    commands: { config: "the configuration file (cordon.json5)" },
    load: async () => [(await import("./commands/config.js")).registerConfigCommand],
  },
  {
    commands: { completion: "print a shell completion script: bash, zsh or fish" },
    load: async () => [(await import("./commands/completion.js")).registerCompletionCommand],
  },
];

/**
 * `cordon help <topic>`: the guides the package ships (docs/), for what no command's help covers,
 * and the few topics printed from the code that decides them.
 */
const helpTopics: Readonly<Record<string, HelpTopic>> = {
  configuration: {
    file: "configuration.md",
    summary: "the config file: every key, its default, layering, trust",
  },
  "scripted-model": {
    file: "scripted-model.md",
    summary: "the file format of --model-script (a model replayed from a script)",
  },
  library: { file: "library.md", summary: "cordon as a library: createRunner and its pieces" },
  network: {
    file: "network.md",
    summary: "network by allowlist: sandbox.egress, --allow-host, the egress proxy, CA trust",
  },
  images: {
    file: "images.md",
    summary: "project images: sandbox.docker.dockerfile, devcontainer.json, what an image needs",
  },
  runtimes: {
    file: "runtimes.md",
    summary: "another agent in the sandbox: --runtime claude-code, a command, the model gateway",
  },
  gvisor: { file: "gvisor.md", summary: "gVisor (runsc) as the sandbox's runtime" },
  "exit-codes": { text: exitCodesText, summary: "what each exit code of cordon means" },
  tools: {
    text: async () => {
      const { builtinTools, describeTools } = await import("../tools/index.js");
      return describeTools(builtinTools());
    },
    summary: "the agent's tools and their input fields (for --model-script, cordon tool, MCP)",
  },
  mcp: {
    file: "mcp.md",
    summary: "cordon mcp: Claude Code, Cursor, Codex with cordon's sandboxed tools; configs, HTTP",
  },
};

interface HelpTopic {
  summary: string;
  /** A guide under docs/, or the text itself. */
  file?: string;
  text?: () => string | Promise<string>;
}

function exitCodesText(): string {
  const lines: [string, string][] = [
    ...Object.entries(exitCodeMeanings),
    [
      String(closedPipeExitCode),
      "the reader of stdout went away (a closed pipe, as with `| head`)",
    ],
  ];
  return lines.map(([code, meaning]) => `  ${code.padStart(3)}  ${meaning}\n`).join("");
}

async function topicText(topic: HelpTopic): Promise<string> {
  if (topic.text) return topic.text();
  return readFileSync(path.join(packageRoot(), "docs", topic.file ?? ""), "utf8");
}

function topicList(): string {
  const width = Math.max(...Object.keys(helpTopics).map((name) => name.length)) + 2;
  return Object.entries(helpTopics)
    .map(([name, topic]) => `  ${name.padEnd(width)}${topic.summary}\n`)
    .join("");
}

/**
 * `cordon help [command...|topic]`: a command's help (`help sandbox list` for a subcommand) or
 * a guide. Replaces commander's own help command, which knows commands only.
 */
function addHelpCommand(program: Command, context: CliContext): void {
  program
    .helpCommand(false)
    .addHelpText(
      "after",
      `\nExit codes:\n${exitCodesText()}\nHelp topics (cordon help <topic>):\n${topicList()}`,
    )
    .command("help")
    .description("help for a command (help sandbox list) or a topic (below)")
    .argument("[names...]", "a command and its subcommands, or a topic")
    .action(async (names: string[]) => {
      const topic = names.length === 1 ? helpTopics[names[0] ?? ""] : undefined;
      if (topic) {
        context.stdout(await topicText(topic));
        return;
      }
      let command = program;
      for (const name of names) {
        const sub = command.commands.find((c) => c.name() === name);
        if (!sub) {
          throw new ConfigError(`no command or help topic "${names.join(" ")}"`, {
            fix: `run \`cordon --help\` for the commands; the topics are ${Object.keys(helpTopics).join(", ")}`,
          });
        }
        command = sub;
      }
      command.outputHelp();
    });
}

/** `cordon version`, as `docker version` and `gh version` have it, beside `--version`. */
function addVersionCommand(program: Command, context: CliContext): void {
  program
    .command("version")
    .description("print cordon's version (--json: with Node's)")
    .option("--json", "as JSON")
    .action((options: { json?: boolean }) => {
      const version = packageVersion();
      context.stdout(
        options.json
          ? `${JSON.stringify({ version, node: process.versions.node })}\n`
          : `cordon ${version}\n`,
      );
    });
}

function packageVersion(): string {
  const manifest = JSON.parse(readFileSync(path.join(packageRoot(), "package.json"), "utf8")) as {
    version?: unknown;
  };
  return typeof manifest.version === "string" ? manifest.version : "0.0.0";
}

/**
 * The command the arguments name: the first word (`cordon help run` names `run`). There are no
 * top-level options that take a value, so the first word is never an option's argument.
 */
export function invokedCommand(argv: readonly string[]): string | undefined {
  const words = argv.slice(2).filter((arg) => !arg.startsWith("-"));
  return words[0] === "help" ? words[1] : words[0];
}

/**
 * The whole CLI for these arguments: the invoked command's module is loaded and registered in
 * full; every other command is only its name and summary, which is all `--help`, `--version`
 * and commander's "did you mean" need.
 */
export async function createProgram(
  context: CliContext,
  argv: readonly string[],
): Promise<Command> {
  return buildProgram(context, (names) => {
    const invoked = invokedCommand(argv);
    return invoked !== undefined && names.includes(invoked);
  });
}

/** The CLI with every command module loaded: the whole tree, for `cordon completion`. */
export async function createFullProgram(context: CliContext): Promise<Command> {
  return buildProgram(context, () => true);
}

async function buildProgram(
  context: CliContext,
  loads: (names: readonly string[]) => boolean,
): Promise<Command> {
  const program = new Command("cordon")
    .description("Sandboxed execution orchestrator for AI coding agents")
    .version(packageVersion())
    .exitOverride()
    .configureOutput({
      writeOut: (text) => context.stdout(text),
      writeErr: (text) => context.stderr(text),
    })
    .showHelpAfterError("(run `cordon --help` for usage)");
  for (const module of commandModules) {
    const names = Object.keys(module.commands);
    if (loads(names)) {
      for (const register of await module.load()) register(program, context);
      continue;
    }
    for (const [name, summary] of Object.entries(module.commands)) {
      program.command(name).description(summary);
    }
  }
  addHelpCommand(program, context);
  addVersionCommand(program, context);
  return program;
}
