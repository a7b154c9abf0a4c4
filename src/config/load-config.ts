import { existsSync } from "node:fs";
import { constants } from "node:fs";
import { open, type FileHandle } from "node:fs/promises";
import { homedir } from "node:os";
import path from "node:path";

import JSON5 from "json5";

import { ConfigError, messageOf, stateDirectory } from "../common/index.js";
import {
  lookUpTrust,
  sha256Of,
  UntrustedConfigError,
  type ConfigOrigin,
  type ConfigSource,
} from "./config-trust.js";
import { environmentLayer } from "./env-layer.js";
import { hostRealpath } from "./host-paths.js";
import { configErrorOf, configIssuesOf } from "./issues.js";
import { looseningKeys, type LooseningKey } from "./loosening-keys.js";
import { isPlainObject, mergeAll, mergeLayers, type PlainObject } from "./merge.js";
import { cordonConfigSchema, type CordonConfig } from "./schema.js";

/** The file looked for in the working directory when no path is given. */
export const defaultConfigFileName = "cordon.json5";

/** A deep-partial config object (what flags set); validated with the rest. */
export type ConfigOverrides = Record<string, unknown>;

export interface LoadConfigOptions {
  /** Directory relative paths from the environment and flags resolve against; also the default workspace. */
  cwd: string;
  env: Readonly<Record<string, string | undefined>>;
  /** `--config`; wins over `CORDON_CONFIG` and `./cordon.json5`. */
  configPath?: string | undefined;
  /**
   * The flag layer, highest priority. Values under `agents.defaults` apply to every agent (they
   * beat an agent's own entry too), so `--sandbox-mode off` means off whatever the file says.
   */
  overrides?: ConfigOverrides | undefined;
  /** For `~/` in paths; default the OS home directory. */
  homeDir?: string | undefined;
  /** Where the trust store is (`cordon config trust`); default `CORDON_HOME`, else `~/.cordon`. */
  stateDir?: string | undefined;
}

export interface LoadedConfig {
  /** Validated, with the built-in defaults applied. */
  config: CordonConfig;
  /** Absolute path of the config file used, if any. */
  file?: string;
  /** The user's own config file (`$XDG_CONFIG_HOME/cordon/config.json5`), when there is one. */
  userFile?: string;
  /** The config file used, how it was found, and whether it is trusted. */
  source?: ConfigSource;
  /** File, environment and flag layers merged, without the built-in defaults (`config show`). */
  explicit: PlainObject;
  /** Things a person should know that did not stop the load (an unreadable trust store). */
  warnings: string[];
}

/**
 * Finds, reads and validates the config: built-in defaults → file → environment → flags.
 * Every problem is reported at once, as `path: message` lines in a `ConfigError` (exit 2).
 * A file found in the working directory that loosens isolation must be trusted first
 * (`UntrustedConfigError`, exit 2).
 */
export async function loadConfig(options: LoadConfigOptions): Promise<LoadedConfig> {
  const cwd = path.resolve(options.cwd);
  const homeDir = options.homeDir ?? homedir();
  const found = findConfigFile(cwd, options.env, options.configPath);
  const warnings: string[] = [];

  const user = await readUserConfig(options.env, homeDir);
  let fileLayer: PlainObject = {};
  let source: ConfigSource | undefined;
  if (found) {
    const { file, origin } = found;
    const contents = await readConfigFile(file, {
      regularFileOnly: origin === "working directory",
    });
    fileLayer = contents.layer;
    source = { file, origin, trusted: origin !== "working directory", sha256: contents.sha256 };
    if (!source.trusted) {
      const stateDir = options.stateDir ?? stateDirectory(options.env);
      const lookup = await lookUpTrust(stateDir, file, source.sha256);
      if (lookup.warning) warnings.push(lookup.warning);
      source.trusted = lookup.trusted;
      if (!source.trusted) {
        const loosened = looseningKeysOfFile(file, fileLayer, homeDir);
        if (loosened.length) {
          throw new UntrustedConfigError(source, loosened, { cwd, changed: lookup.changed });
        }
      }
    }
    fileLayer = resolveLayerPaths(fileLayer, path.dirname(file), homeDir);
  }
  const envLayer = resolveLayerPaths(environmentLayer(options.env), cwd, homeDir);
  const flagLayer = resolveLayerPaths(options.overrides ?? {}, cwd, homeDir);

  const explicit = forceAgentDefaults(
    mergeAll([user?.layer ?? {}, fileLayer, envLayer, flagLayer]) as PlainObject,
    [envLayer, flagLayer],
  );
  const merged = mergeLayers(builtinDefaults(cwd), explicit);
  const parsed = cordonConfigSchema.safeParse(merged);
  if (!parsed.success) {
    const files = [user?.file, found?.file].filter((file) => file !== undefined);
    throw configErrorOf(
      `the config (${[...files, "environment and flags"].join(", ")})`,
      configIssuesOf(parsed.error, cordonConfigSchema, merged),
    );
  }
  return {
    config: parsed.data,
    explicit,
    warnings,
    ...(source && { file: source.file, source }),
    ...(user && { userFile: user.file }),
  };
}

/**
 * The user's own config, under the platform's config directory as gh and codex keep theirs:
 * `$XDG_CONFIG_HOME/cordon/config.json5`, else `~/.config/cordon/config.json5`. It lies under
 * the first layer a project's file overrides, and it is trusted as `--config` is: the person wrote
 * it for every project (`disk: "unlimited"` once, not in each repository's file).
 */
export function userConfigPath(env: LoadConfigOptions["env"], homeDir: string): string {
  const base = env["XDG_CONFIG_HOME"] || path.join(homeDir, ".config");
  return path.join(base, "cordon", "config.json5");
}

async function readUserConfig(
  env: LoadConfigOptions["env"],
  homeDir: string,
): Promise<{ file: string; layer: PlainObject } | undefined> {
  const file = userConfigPath(env, homeDir);
  if (!existsSync(file)) return undefined;
  const { layer } = await readConfigFile(file, { regularFileOnly: true });
  return { file, layer: resolveLayerPaths(layer, path.dirname(file), homeDir) };
}

/**
 * Validates a config object an embedder built in code, applying the built-in defaults. Relative
 * workspace paths resolve against `cwd` (default: the process's working directory).
 */
export function parseConfig(
  value: unknown,
  options: { cwd?: string; homeDir?: string } = {},
): CordonConfig {
  const cwd = path.resolve(options.cwd ?? process.cwd());
  if (!isPlainObject(value)) {
    throw new ConfigError("a config must be an object", { fix: "pass `{}` for all defaults" });
  }
  const resolved = resolveLayerPaths(value, cwd, options.homeDir ?? homedir());
  const merged = mergeLayers(builtinDefaults(cwd), resolved);
  const parsed = cordonConfigSchema.safeParse(merged);
  if (!parsed.success)
    throw configErrorOf("the config", configIssuesOf(parsed.error, cordonConfigSchema, merged));
  return parsed.data;
}

/**
 * The built-in defaults as a layer of their own, so the file merges into them like any layer
 * (a file's `tmpfs: { "/cache": … }` adds to the default mounts instead of replacing them).
 */
export function builtinDefaults(cwd: string): CordonConfig {
  return cordonConfigSchema.parse({ agents: { defaults: { workspace: path.resolve(cwd) } } });
}

function findConfigFile(
  cwd: string,
  env: LoadConfigOptions["env"],
  configPath: string | undefined,
): { file: string; origin: ConfigOrigin } | undefined {
  // An empty value means "not set", so CORDON_CONFIG="" turns the variable off.
  const named = configPath || env["CORDON_CONFIG"];
  if (named) {
    const file = path.resolve(cwd, named);
    const origin = configPath ? "--config" : "CORDON_CONFIG";
    if (!existsSync(file)) {
      throw new ConfigError(`config file ${file} (from ${origin}) does not exist`, {
        fix: `check the path given to ${origin}`,
      });
    }
    return { file, origin };
  }
  const local = path.join(cwd, defaultConfigFileName);
  return existsSync(local) ? { file: local, origin: "working directory" } : undefined;
}

/** A config file as read: its schema-checked top level, and the hash of exactly those bytes. */
export interface ConfigFileContents {
  /** As written (paths not resolved, no defaults). */
  layer: PlainObject;
  /** sha256 of the bytes parsed, lowercase hex. */
  sha256: string;
}

/** A config is a few KiB; past this it is not one (and a link to /dev/zero must not fill memory). */
const maxConfigBytes = 1024 * 1024;

/**
 * Reads a config file once and checks it against the schema: the bytes hashed for trust are
 * the bytes parsed, so an edit between the two cannot go unnoticed. `regularFileOnly` is for a
 * file cordon found rather than was given: a FIFO or device planted there is refused, not read.
 */
export async function readConfigFile(
  file: string,
  options: { regularFileOnly?: boolean } = {},
): Promise<ConfigFileContents> {
  const bytes = await readConfigBytes(file, options.regularFileOnly ?? false);
  const layer = parseConfigText(file, bytes.toString("utf8"));
  const checked = cordonConfigSchema.safeParse(layer);
  if (!checked.success) {
    throw configErrorOf(file, configIssuesOf(checked.error, cordonConfigSchema, layer));
  }
  return { layer, sha256: sha256Of(bytes) };
}

async function readConfigBytes(file: string, regularFileOnly: boolean): Promise<Buffer> {
  let handle: FileHandle;
  try {
    // O_NONBLOCK: opening a planted FIFO returns at once (fstat then refuses it) instead of hanging.
    const flags = regularFileOnly ? constants.O_RDONLY | constants.O_NONBLOCK : constants.O_RDONLY;
    handle = await open(file, flags);
  } catch (error) {
    throw new ConfigError(`cannot read config file ${file}: ${messageOf(error)}`, {
      fix: "check that the file exists and is readable",
      cause: error,
    });
  }
  try {
    if (regularFileOnly && !(await handle.stat()).isFile()) {
      throw new ConfigError(`${file} is not a regular file`, {
        fix: "replace it with a regular file, or name the config you mean with --config",
      });
    }
    const chunks: Buffer[] = [];
    let total = 0;
    for (;;) {
      const { bytesRead, buffer } = await handle.read(Buffer.alloc(64 * 1024), 0, 64 * 1024, null);
      if (bytesRead === 0) return Buffer.concat(chunks);
      total += bytesRead;
      if (total > maxConfigBytes) {
        throw new ConfigError(`${file} is larger than 1 MiB, too large for a config file`, {
          fix: "check that it is the config file you meant",
        });
      }
      chunks.push(buffer.subarray(0, bytesRead));
    }
  } finally {
    await handle.close();
  }
}

/** What a file's own settings loosen, judged where the file is (its relative paths mean that). */
export function looseningKeysOfFile(
  file: string,
  layer: PlainObject,
  homeDir: string,
): LooseningKey[] {
  return looseningKeys(layer, { directory: path.dirname(file), homeDir, realpath: hostRealpath });
}

/** JSON5 text → the top-level object; syntax errors point at the line and column. */
function parseConfigText(file: string, text: string): PlainObject {
  let value: unknown;
  try {
    value = JSON5.parse(text);
  } catch (error) {
    const where = error as { lineNumber?: number; columnNumber?: number };
    const at =
      where.lineNumber === undefined ? "" : `:${where.lineNumber}:${where.columnNumber ?? 0}`;
    throw new ConfigError(`${file}${at} is not valid JSON5: ${messageOf(error)}`, {
      fix: "fix the syntax (JSON5 allows comments, trailing commas and unquoted keys)",
      cause: error,
    });
  }
  if (!isPlainObject(value)) {
    throw new ConfigError(`${file} must contain an object ({ … }) at the top level`, {
      fix: "wrap the settings in { }",
    });
  }
  return value;
}

/** `~` and `~/x` → the home directory; relative paths → against `base`. */
export function resolveConfigPath(value: string, base: string, homeDir: string): string {
  if (value === "~") return homeDir;
  if (value.startsWith("~/")) return path.join(homeDir, value.slice(2));
  return path.resolve(base, value);
}

/**
 * Workspace paths in a layer resolve against the directory of the layer's source: the config
 * file's directory for the file, the working directory for environment and flags.
 */
function resolveLayerPaths(layer: PlainObject, base: string, homeDir: string): PlainObject {
  const agents = layer["agents"];
  if (!isPlainObject(agents)) return layer;
  const resolveEntry = (entry: unknown): unknown => {
    if (!isPlainObject(entry)) return entry;
    const out: PlainObject = { ...entry };
    if (typeof out["workspace"] === "string" && out["workspace"] !== "") {
      out["workspace"] = resolveConfigPath(out["workspace"], base, homeDir);
    }
    const sandbox = out["sandbox"];
    if (isPlainObject(sandbox) && typeof sandbox["workspaceRoot"] === "string") {
      out["sandbox"] = {
        ...sandbox,
        workspaceRoot: resolveConfigPath(sandbox["workspaceRoot"], base, homeDir),
      };
    }
    return out;
  };
  const resolved: PlainObject = { ...agents };
  if ("defaults" in agents) resolved["defaults"] = resolveEntry(agents["defaults"]);
  if (Array.isArray(agents["list"])) resolved["list"] = agents["list"].map(resolveEntry);
  return { ...layer, agents: resolved };
}

/**
 * Environment and flags beat the file, including an agent's own entry: their `agents.defaults`
 * values are layered over every `agents.list[]` entry as well.
 */
function forceAgentDefaults(merged: PlainObject, forcing: readonly PlainObject[]): PlainObject {
  const forced = mergeAll(
    forcing.map((layer) => {
      const agents = layer["agents"];
      return isPlainObject(agents) ? agents["defaults"] : undefined;
    }),
  );
  const agents = merged["agents"];
  const entries: unknown = isPlainObject(agents) ? agents["list"] : undefined;
  if (!isPlainObject(forced) || !isPlainObject(agents) || !Array.isArray(entries)) {
    return merged;
  }
  const list = entries.map((entry: unknown) =>
    isPlainObject(entry) ? mergeLayers(entry, forced) : entry,
  );
  return { ...merged, agents: { ...agents, list } };
}
