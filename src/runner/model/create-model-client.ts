import { ConfigError, type Logger } from "../../common/index.js";
import { AnthropicModelClient, anthropicOptionsFromEnv } from "./anthropic-model-client.js";
import { ScriptedModelClient } from "./scripted-model-client.js";
import type { ModelClient } from "./types.js";

export interface CreateModelClientOptions {
  /** Environment to read ANTHROPIC_API_KEY / ANTHROPIC_AUTH_TOKEN / ANTHROPIC_BASE_URL from. */
  env: Readonly<Record<string, string | undefined>>;
  /** A scripted-model file (docs/scripted-model.md); wins over any API key. */
  scriptPath?: string | undefined;
  logger?: Logger | undefined;
  signal?: AbortSignal | undefined;
}

/**
 * The model a run talks to: the scripted model when a script is given, else the Anthropic API
 * when a key or token is set (any Messages-compatible server through ANTHROPIC_BASE_URL).
 */
export async function createModelClient(options: CreateModelClientOptions): Promise<ModelClient> {
  if (options.scriptPath) return ScriptedModelClient.fromFile(options.scriptPath, options.signal);
  const anthropic = anthropicOptionsFromEnv(options.env);
  if (!anthropic.apiKey && !anthropic.authToken) {
    throw new ConfigError("no model to talk to: ANTHROPIC_API_KEY is not set", {
      fix: "export ANTHROPIC_API_KEY=…, or pass --model-script FILE to replay a scripted model (`cordon help scripted-model`)",
    });
  }
  return new AnthropicModelClient({ ...anthropic, logger: options.logger });
}
