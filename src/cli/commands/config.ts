import { existsSync } from "node:fs";
import { rm, writeFile } from "node:fs/promises";
import { homedir } from "node:os";
import path from "node:path";

import type { Command } from "commander";

import {
  ConfigError,
  CordonError,
  ExitCode,
  messageOf,
  stateDirectory,
} from "../../common/index.js";
import {
  ConfigValidationError,
  configJsonSchema,
  defaultConfigFileName,
  displayPath,
  formatConfigJson5,
  formatKeyValue,
  looseningKeysOfFile,
  readConfigFile,
  starterConfigText,
  trustConfigFile,
  untrustConfigFile,
  UntrustedConfigError,
  type ConfigIssue,
  type ConfigSource,
  type CordonConfig,
  type LoadedConfig,
  type LooseningKey,
} from "../../config/index.js";
import { SandboxSettingsRefusedError, implicitAgentId } from "../../policy/index.js";
import type { CliContext } from "../context.js";
import { loadCliConfig, planFromConfig } from "../plan-context.js";

export interface ValidatedAgent {
  id: string;
  /** The main session and a sandboxed-if-anything session, as `run` would plan them. */
  sessions: { sessionKey: string; sandboxed: boolean; containerName?: string }[];
  tools: string[];
}

export interface ValidationReport {
  ok: boolean;
  /** The config file used; null = built-in defaults and environment only. */
  file: string | null;
  /** How the file was found and whether it is trusted (`cordon config trust`); null = no file. */
  source: ConfigSource | null;
  agents: ValidatedAgent[];
  issues: ConfigIssue[];
  warnings: string[];
}

/** A session name no real session is likely to use, to plan a non-main session. */
const probeSession = "config-validate";

function issuesOf(error: unknown, agentId: string): ConfigIssue[] {
  if (error instanceof SandboxSettingsRefusedError || error instanceof ConfigValidationError) {
    return [...error.issues];
  }
  const fix = CordonError.is(error) && error.fix ? ` (fix: ${error.fix})` : "";
  return [{ path: `agent "${agentId}"`, message: `${messageOf(error)}${fix}` }];
}

/**
 * Beyond the schema: plans every agent's main session and one other session, so refusals that
 * depend on the host (protected binds, symlinks, credential names, an empty tool set) show up now
 * rather than at the first run.
 */
function validatePlans(
  context: CliContext,
  config: CordonConfig,
): Omit<ValidationReport, "file" | "source" | "ok"> {
  const ids = config.agents.list.length ? config.agents.list.map((a) => a.id) : [implicitAgentId];
  const issues: ConfigIssue[] = [];
  const warnings = new Set<string>();
  const agents: ValidatedAgent[] = [];
  const seenIssues = new Set<string>();
  for (const id of ids) {
    const agent: ValidatedAgent = { id, sessions: [], tools: [] };
    for (const sessionKey of [undefined, probeSession]) {
      try {
        const plan = planFromConfig(context, config, { agentId: id, sessionKey });
        const session: ValidatedAgent["sessions"][number] = {
          sessionKey: plan.sessionKey,
          sandboxed: plan.sandbox.enabled,
        };
        if (plan.sandbox.spec) session.containerName = plan.sandbox.spec.containerName;
        agent.sessions.push(session);
        agent.tools = plan.tools.allowed;
        for (const warning of plan.warnings) warnings.add(`${id}: ${warning}`);
        if (!existsSync(plan.agent.workspace)) {
          warnings.add(`${id}: the workspace ${plan.agent.workspace} does not exist (yet)`);
        }
      } catch (error) {
        for (const issue of issuesOf(error, id)) {
          const key = `${issue.path}\0${issue.message}`;
          if (!seenIssues.has(key)) issues.push(issue);
          seenIssues.add(key);
        }
      }
    }
    agents.push(agent);
  }
  return { agents, issues, warnings: [...warnings] };
}

/** `(found in the working directory; not trusted: it may tighten isolation, not loosen it)`. */
export function describeSource(source: ConfigSource): string {
  const how =
    source.origin === "working directory"
      ? "found in the working directory"
      : `named with ${source.origin}`;
  if (source.trusted) return `(${how}; trusted)`;
  return `(${how}; not trusted: it may tighten isolation, not loosen it; \`cordon config trust\` to trust it)`;
}

/** The files a loaded config came from, the project's over the user's: `config show`'s header. */
function describeLayers(loaded: LoadedConfig): string {
  const files = [
    ...(loaded.source ? [`${loaded.source.file} ${describeSource(loaded.source)}`] : []),
    ...(loaded.userFile ? [`${loaded.userFile} (your user config; trusted)`] : []),
  ];
  return files.length > 0 ? files.join(" under ") : "no config file";
}

function formatReport(report: ValidationReport): string {
  const file = report.source
    ? `${report.source.file} ${describeSource(report.source)}`
    : "no config file; built-in defaults and environment";
  const lines = [`ok: ${file}`];
  for (const agent of report.agents) {
    const sessions = agent.sessions
      .map(
        (s) => `${s.sessionKey} ${s.sandboxed ? `sandboxed (${s.containerName})` : "on the host"}`,
      )
      .join("; ");
    lines.push(`  agent ${agent.id}: ${sessions}; tools ${agent.tools.join(", ")}`);
  }
  if (report.warnings.length) {
    lines.push("warnings:");
    for (const warning of report.warnings) lines.push(`  ! ${warning}`);
  }
  return `${lines.join("\n")}\n`;
}

interface ConfigFileOptions {
  config?: string;
  json?: boolean;
}

export function registerConfigCommand(program: Command, context: CliContext): void {
  const config = program.command("config").description("the configuration file (cordon.json5)");

  config
    .command("init [file]")
    .description(
      `write a commented starter config (default ./${defaultConfigFileName}): the settings people change first, at their defaults`,
    )
    .option("--force", "replace the file if it exists")
    .action(async (file: string | undefined, options: { force?: boolean }) => {
      const cwd = process.cwd();
      const target = path.resolve(cwd, file ?? defaultConfigFileName);
      await writeStarterConfig(target, options.force === true);
      context.stdout(
        `wrote ${displayPath(target, cwd)}\n  check it: cordon config validate --config ${displayPath(target, cwd)}\n  see what a run gets: cordon sandbox explain\n`,
      );
    });

  config
    .command("validate")
    .description(
      "check the config: every schema problem, then every agent's sandbox and tool plan (exit 2 on any problem)",
    )
    .option("--config <path>", "config file (default: $CORDON_CONFIG, else ./cordon.json5)")
    .option("--json", "print the report as JSON")
    .action(async (options: ConfigFileOptions) => {
      let report: ValidationReport;
      try {
        const loaded = await loadCliConfig(context, { configPath: options.config });
        const checked = validatePlans(context, loaded.config);
        report = {
          ok: checked.issues.length === 0,
          file: loaded.file ?? null,
          source: loaded.source ?? null,
          ...checked,
        };
      } catch (error) {
        if (!(error instanceof ConfigValidationError) || !options.json) throw error;
        const source = error instanceof UntrustedConfigError ? error.source : null;
        report = {
          ok: false,
          file: source?.file ?? null,
          source,
          agents: [],
          issues: [...error.issues],
          warnings: [],
        };
      }
      if (options.json) {
        context.stdout(`${JSON.stringify(report, null, 2)}\n`);
        if (!report.ok) context.exitCode = ExitCode.usage;
        return;
      }
      if (!report.ok) throw new ConfigValidationError(report.file ?? "the config", report.issues);
      context.stdout(formatReport(report));
    });

  config
    .command("schema")
    .description("print the JSON Schema of the config file")
    .action(() => {
      context.stdout(`${JSON.stringify(configJsonSchema(), null, 2)}\n`);
    });

  config
    .command("show")
    .description(
      "print the config from the file, environment and flags (--resolved: with every default filled in)",
    )
    .option("--config <path>", "config file (default: $CORDON_CONFIG, else ./cordon.json5)")
    .option("--resolved", "include every built-in default")
    .option("--json", "print JSON instead of JSON5")
    .action(async (options: ConfigFileOptions & { resolved?: boolean }) => {
      const loaded = await loadCliConfig(context, { configPath: options.config });
      const value = options.resolved ? loaded.config : loaded.explicit;
      if (options.json) {
        context.stdout(`${JSON.stringify(value, null, 2)}\n`);
        return;
      }
      context.stdout(
        `// ${options.resolved ? "resolved config (defaults included)" : "config"} from ${describeLayers(loaded)}\n${formatConfigJson5(value)}`,
      );
    });

  config
    .command("trust [file]")
    .description(
      `trust a config file cordon finds in the working directory (default ./${defaultConfigFileName}), so it may loosen isolation: records its real path and sha256 under CORDON_HOME; any edit makes it untrusted again`,
    )
    .option("--json", "print what was trusted as JSON")
    .action(async (file: string | undefined, options: { json?: boolean }) => {
      const cwd = process.cwd();
      const target = existingConfigFile(cwd, file);
      const contents = await readConfigFile(target, { regularFileOnly: true });
      const loosens = looseningKeysOfFile(target, contents.layer, homedir());
      const trusted = await trustConfigFile(stateDirectory(context.env), target, contents.sha256);
      if (trusted.warning) context.logger.warn(trusted.warning);
      const { record } = trusted;
      if (options.json) {
        const report = { path: record.path, sha256: record.sha256, loosens };
        context.stdout(`${JSON.stringify(report, null, 2)}\n`);
        return;
      }
      context.stdout(formatTrusted(record.path, record.sha256, loosens, displayPath(target, cwd)));
    });

  config
    .command("untrust [file]")
    .description(
      `forget a trusted config file (default ./${defaultConfigFileName}); found in the working directory again, it may only tighten isolation`,
    )
    .action(async (file: string | undefined) => {
      const cwd = process.cwd();
      const target = path.resolve(cwd, file ?? defaultConfigFileName);
      const result = await untrustConfigFile(stateDirectory(context.env), target);
      if (result.warning) context.logger.warn(result.warning);
      context.stdout(
        result.removed ? `untrusted ${result.location}\n` : `${result.location} was not trusted\n`,
      );
    });
}

/** Writes the starter config; never over an existing file unless `force` (then not through a link). */
async function writeStarterConfig(target: string, force: boolean): Promise<void> {
  try {
    // The link itself goes, never the file it points at; wx then fails on anything there.
    if (force) await rm(target, { force: true });
    await writeFile(target, starterConfigText, { flag: "wx", mode: 0o644 });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "EEXIST") {
      throw new ConfigError(`${target} already exists`, {
        fix: "edit it, name another file (`cordon config init other.json5`), or replace it with --force",
      });
    }
    throw new ConfigError(`cannot write ${target}: ${messageOf(error)}`, {
      fix: "check that its directory exists and is writable",
      cause: error,
    });
  }
}

function existingConfigFile(cwd: string, file: string | undefined): string {
  const target = path.resolve(cwd, file ?? defaultConfigFileName);
  if (!existsSync(target)) {
    throw new ConfigError(`there is no config file at ${target}`, {
      fix: file
        ? "check the path"
        : `run it where ${defaultConfigFileName} is, or name the file: \`cordon config trust path/to/${defaultConfigFileName}\``,
    });
  }
  return target;
}

function formatTrusted(
  location: string,
  sha256: string,
  loosens: readonly LooseningKey[],
  shown: string,
): string {
  const lines = [`trusted ${location}`, `  sha256 ${sha256}`];
  if (loosens.length) {
    lines.push("  it loosens isolation with:");
    for (const key of loosens) {
      lines.push(`    ${key.path}: ${formatKeyValue(key.value)} — ${key.reason}`);
    }
  } else {
    lines.push("  it loosens nothing (it would have worked untrusted too)");
  }
  lines.push(
    `  any edit makes it untrusted again; \`cordon config untrust ${shown}\` forgets it now`,
  );
  return `${lines.join("\n")}\n`;
}
