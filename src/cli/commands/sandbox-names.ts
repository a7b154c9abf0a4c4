import { ConfigError } from "../../common/index.js";

/** What a sandbox is known by: its container name and the session it serves. */
export interface NamedSandbox {
  name: string;
  /** The session key, `agent:<agent>:<name>`. */
  session: string;
}

function sessionName(key: string): string {
  return key.split(":").slice(2).join(":");
}

/**
 * The sandbox a word on the command line means, as `docker rm` takes an id prefix: its exact
 * container name; else the sandbox of a session (its key, `agent:main:fix`, or its name, `fix`);
 * else the one name the word begins. A word that fits several is refused with each candidate, so
 * nothing is removed by a guess; one that fits none is passed on as given (the caller says it does
 * not exist).
 */
export function resolveSandboxName(word: string, sandboxes: readonly NamedSandbox[]): string {
  if (sandboxes.some((sandbox) => sandbox.name === word)) return word;
  const bySession = sandboxes.filter(
    (sandbox) => sandbox.session === word || sessionName(sandbox.session) === word,
  );
  const candidates =
    bySession.length > 0 ? bySession : sandboxes.filter((sandbox) => sandbox.name.startsWith(word));
  if (candidates.length === 1 && candidates[0]) return candidates[0].name;
  if (candidates.length > 1) {
    throw new ConfigError(
      `"${word}" could mean ${candidates.length} sandboxes: ${candidates.map((sandbox) => sandbox.name).join(", ")}`,
      { fix: "give the full name (`cordon sandbox list` shows them), or a longer prefix" },
    );
  }
  return word;
}
