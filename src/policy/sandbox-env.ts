import type { ConfigIssue } from "../config/index.js";
import { planned, type Planned } from "./planned.js";

/** Names that reach the host or a credential: never passed into a sandbox by accident. */
const forbiddenNames = new Set([
  "SSH_AUTH_SOCK",
  "SSH_AGENT_PID",
  "DOCKER_HOST",
  "DOCKER_CONFIG",
  "DOCKER_CERT_PATH",
  "DOCKER_TLS_VERIFY",
  "CONTAINER_HOST",
  "KUBECONFIG",
  "GIT_ASKPASS",
  "SSH_ASKPASS",
  "NETRC",
  "AWS_PROFILE",
  "AWS_SHARED_CREDENTIALS_FILE",
  "AWS_CONFIG_FILE",
  "CORDON_CONFIG",
  "CORDON_HOME",
]);

/** Words that mark a secret when they stand as a `_`-separated part of the name. */
const secretWords =
  /(^|_)(API_?KEYS?|APIKEY|KEYS?|TOKENS?|SECRETS?|PASSWORDS?|PASSWD|PASS|CREDENTIALS?|CREDS|AUTH|PRIVATE|COOKIES?|SIGNATURE)(_|$)/i;

/** Why this environment variable name looks like a credential, or undefined. */
export function credentialLikeName(name: string): string | undefined {
  if (forbiddenNames.has(name.toUpperCase())) return "reaches a host service or credential";
  if (secretWords.test(name)) return "looks like a credential";
  if (/TOKEN|SECRET|PASSWORD|APIKEY|API_KEY/i.test(name)) return "looks like a credential";
  return undefined;
}

export interface SandboxEnvironmentInput {
  /** Declared variables; null removes one inherited from agents.defaults. */
  env: Readonly<Record<string, string | null>>;
  /** `dangerouslyAllowEnvNames`: credential-like names the user explicitly passes. */
  allowedNames: readonly string[];
  configKey: string;
}

/**
 * The sandbox's environment: exactly what the config declares, nothing from the host. Refuses
 * names that are not plain identifiers, NUL bytes (they would cut the value), and credential-like
 * names unless listed in `dangerouslyAllowEnvNames`.
 */
export function sandboxEnvironment(
  input: SandboxEnvironmentInput,
): Planned<Record<string, string>> {
  const env: Record<string, string> = {};
  const issues: ConfigIssue[] = [];
  const warnings: string[] = [];
  const allowed = new Set(input.allowedNames);
  for (const [name, value] of Object.entries(input.env)) {
    if (value === null) continue;
    const path = `${input.configKey}.${name}`;
    if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(name)) {
      issues.push({
        path,
        message: "an environment variable name is letters, digits and _",
      });
      continue;
    }
    if (value.includes("\0") || name.includes("\0")) {
      issues.push({ path, message: "contains a NUL byte" });
      continue;
    }
    const credential = credentialLikeName(name);
    if (credential) {
      if (!allowed.has(name)) {
        issues.push({
          path,
          message: `${name} ${credential}; secrets do not go into sandboxes (list it in sandbox.docker.dangerouslyAllowEnvNames to pass it anyway)`,
        });
        continue;
      }
      warnings.push(`${name} is passed into the sandbox (dangerouslyAllowEnvNames)`);
    }
    env[name] = value;
  }
  return planned(env, { issues, warnings });
}
