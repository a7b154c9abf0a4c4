import { ConfigError } from "../common/index.js";

/** Longest session key (the session store's limit). */
export const maxSessionKeyLength = 120;

/** `agent:<id>:main`: the one session `sandbox.mode: "non-main"` leaves on the host. */
export function mainSessionKey(agentId: string): string {
  return `agent:${agentId}:main`;
}

/**
 * The canonical session key: none → `agent:<id>:main`; a bare name `x` → `agent:<id>:x`;
 * `agent:<id>:x` stays (and must name this agent). Matching is exact: `MAIN`, `main ` or a
 * look-alike spelling is a different session, never the main one, so a name cannot buy its way
 * out of the sandbox.
 */
export function normalizeSessionKey(agentId: string, sessionKey: string | undefined): string {
  if (sessionKey === undefined) return mainSessionKey(agentId);
  const fix = "use a session name of printable characters, e.g. --session fix-1";
  if (sessionKey.length === 0) {
    throw new ConfigError("the session key is empty", { fix });
  }
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u001f\u007f]/.test(sessionKey)) {
    throw new ConfigError(
      `the session key ${JSON.stringify(sessionKey)} contains control characters`,
      {
        fix,
      },
    );
  }
  if (sessionKey.trim() !== sessionKey) {
    throw new ConfigError(
      `the session key ${JSON.stringify(sessionKey)} starts or ends with whitespace`,
      { fix },
    );
  }
  let key: string;
  if (sessionKey.startsWith("agent:")) {
    const match = /^agent:([^:]*):(.+)$/s.exec(sessionKey);
    if (!match) {
      throw new ConfigError(
        `the session key "${sessionKey}" is not of the form agent:<id>:<name>`,
        {
          fix,
        },
      );
    }
    if (match[1] !== agentId) {
      throw new ConfigError(
        `the session key "${sessionKey}" belongs to agent "${match[1]}", not "${agentId}"`,
        { fix: `pass --agent ${match[1] ?? ""} or a bare session name` },
      );
    }
    key = sessionKey;
  } else {
    key = `agent:${agentId}:${sessionKey}`;
  }
  if (key.length > maxSessionKeyLength) {
    throw new ConfigError(
      `the session key "${key}" is longer than ${maxSessionKeyLength} characters`,
      { fix: "choose a shorter session name" },
    );
  }
  return key;
}
