import { PolicyDeniedError } from "../common/index.js";
import type { ConfigIssue } from "../config/index.js";

/**
 * The config asks for sandbox settings the rules refuse (a protected bind, host networking, a
 * credential in the environment …). Carries every refusal, so `cordon config validate` can list
 * them with their config paths.
 */
export class SandboxSettingsRefusedError extends PolicyDeniedError {
  constructor(
    readonly agentId: string,
    readonly issues: readonly ConfigIssue[],
  ) {
    super(
      `the sandbox settings for agent "${agentId}" are refused:\n${issues.map((i) => `  ${i.path}: ${i.message}`).join("\n")}`,
      { fix: "change the keys above; `cordon sandbox explain` shows the full plan" },
    );
  }
}
