import { homedir } from "node:os";

import { stateDirectory } from "../common/index.js";
import {
  hostPathOwner,
  hostProcessOwner,
  hostEntryKind,
  hostRealpath,
  loadConfig,
  type ConfigOverrides,
  type CordonConfig,
  type LoadedConfig,
} from "../config/index.js";
import { planRun, type RunPlan, type ToolCatalog } from "../policy/index.js";
import type { CliContext } from "./context.js";

export interface CliConfigOptions {
  /** `--config PATH`. */
  configPath?: string | undefined;
  /** What the command's flags set; values under `agents.defaults` apply to every agent. */
  overrides?: ConfigOverrides | undefined;
  /** Default: the process's working directory. */
  cwd?: string | undefined;
}

/** The config as every command loads it: defaults → file → environment → flags. */
export async function loadCliConfig(
  context: CliContext,
  options: CliConfigOptions = {},
): Promise<LoadedConfig> {
  const loaded = await loadConfig({
    cwd: options.cwd ?? process.cwd(),
    env: context.env,
    configPath: options.configPath,
    overrides: options.overrides,
    homeDir: homedir(),
    stateDir: stateDirectory(context.env),
  });
  for (const warning of loaded.warnings) context.logger.warn(warning);
  return loaded;
}

export interface CliPlanOptions {
  agentId?: string | undefined;
  /** A bare name or `agent:<id>:<name>`. */
  sessionKey?: string | undefined;
  runTools?: { allow?: string[] | undefined; deny?: string[] | undefined } | undefined;
  catalog?: ToolCatalog | undefined;
}

/**
 * The run plan on this host: the one code path `cordon run` and `cordon sandbox explain` share,
 * so explain prints exactly what a run gets.
 */
export function planFromConfig(
  context: CliContext,
  config: CordonConfig,
  options: CliPlanOptions = {},
): RunPlan {
  return planRun({
    config,
    agentId: options.agentId,
    sessionKey: options.sessionKey,
    runTools: options.runTools,
    catalog: options.catalog,
    stateDir: stateDirectory(context.env),
    homeDir: homedir(),
    realpath: hostRealpath,
    entryKind: hostEntryKind,
    pathOwner: hostPathOwner,
    invokingUser: hostProcessOwner(),
  });
}
