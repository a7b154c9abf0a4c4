import { ConfigError, type Logger } from "../../common/index.js";
import { apiKeyListVariable, apiKeysFromEnv } from "./api-keys.js";
import { AnthropicModelClient, anthropicOptionsFromEnv } from "./anthropic-model-client.js";
import { fileKeyStateStore } from "./key-state-file.js";
import { RotatingModelClient } from "./rotating-model-client.js";
import { ScriptedModelClient } from "./scripted-model-client.js";
import type { ModelClient } from "./types.js";

export interface CreateModelClientOptions {
  /**
   * Environment to read the key(s) (ANTHROPIC_API_KEY, ANTHROPIC_API_KEYS or the variables
   * `apiKeyEnv` names), ANTHROPIC_AUTH_TOKEN and ANTHROPIC_BASE_URL from.
   */
  env: Readonly<Record<string, string | undefined>>;
  /** `model.apiKeyEnv`: the variables holding the API keys, in the order to use them. */
  apiKeyEnv?: readonly string[] | undefined;
  /**
   * CORDON_HOME: where several keys record their use and cooldowns for every process. Without it
   * the keys still rotate, within this process only.
   */
  stateDir?: string | undefined;
  /** A scripted-model file (docs/scripted-model.md); wins over any API key. */
  scriptPath?: string | undefined;
  logger?: Logger | undefined;
  signal?: AbortSignal | undefined;
}

/**
 * The model a run talks to: the scripted model when a script is given, else the Anthropic API
 * when a key or token is set (any Messages-compatible server through ANTHROPIC_BASE_URL). Several
 * keys take turns (rotating-model-client.ts).
 */
export async function createModelClient(options: CreateModelClientOptions): Promise<ModelClient> {
  if (options.scriptPath) return ScriptedModelClient.fromFile(options.scriptPath, options.signal);
  const anthropic = anthropicOptionsFromEnv(options.env);
  const keys = apiKeysFromEnv(options.env, options.apiKeyEnv);
  const logger = options.logger;
  const [only] = keys;
  if (keys.length > 1) {
    return new RotatingModelClient({
      keys,
      clientFor: (key) => new AnthropicModelClient({ ...anthropic, apiKey: key.secret, logger }),
      store: options.stateDir ? fileKeyStateStore(options.stateDir, logger) : undefined,
      logger,
    });
  }
  if (only) return new AnthropicModelClient({ ...anthropic, apiKey: only.secret, logger });
  if (anthropic.authToken) return new AnthropicModelClient({ ...anthropic, logger });
  throw new ConfigError("no model to talk to: ANTHROPIC_API_KEY is not set", {
    fix: `export ANTHROPIC_API_KEY=… (several keys: ${apiKeyListVariable}=k1,k2), or pass --model-script FILE to replay a scripted model (\`cordon help scripted-model\`)`,
  });
}
