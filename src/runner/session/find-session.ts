import { access } from "node:fs/promises";

import { ConfigError } from "../../common/index.js";
import { listSessions } from "./list-sessions.js";
import { sessionFiles } from "./session-name.js";

export interface FindSessionOptions {
  stateDir: string;
  /** The project (workspace id) whose sessions to search. */
  project?: string | undefined;
  /** What the user typed: a full key, a session name, or the start of either. */
  name: string;
  /**
   * The key a run with this `--session` would use (`agent:<id>:<name>`): taken when that session
   * has any file yet (a run that just started has a lock and events before its transcript).
   */
  runKey?: string | undefined;
}

/** The part after `agent:<id>:`, or the whole key for keys of another shape. */
function shortName(sessionKey: string): string {
  const match = /^agent:[^:]*:(.*)$/s.exec(sessionKey);
  return match?.[1] ?? sessionKey;
}

async function exists(file: string): Promise<boolean> {
  return access(file).then(
    () => true,
    () => false,
  );
}

/**
 * The session key `name` means in a project, as `docker` takes a container id prefix: the exact
 * key; else the session whose short name (after `agent:<id>:`) it is; else the one session whose
 * key or short name starts with it. Ambiguous or unknown names are errors that list what exists.
 */
export async function findSession(options: FindSessionOptions): Promise<string> {
  const { stateDir, project, name } = options;
  if (options.runKey !== undefined) {
    const files = sessionFiles(stateDir, options.runKey, project);
    for (const file of [files.transcript, files.events, files.lock]) {
      if (await exists(file)) return options.runKey;
    }
  }
  const keys = (await listSessions({ stateDir, project })).map((session) => session.sessionKey);
  const pick = (matches: string[]): string | undefined => {
    if (matches.length <= 1) return matches[0];
    throw new ConfigError(`"${name}" matches several sessions: ${matches.join(", ")}.`, {
      fix: "Give more of the name, or the full key.",
    });
  };
  const found =
    pick(keys.filter((key) => key === name)) ??
    pick(keys.filter((key) => shortName(key) === name)) ??
    pick(keys.filter((key) => key.startsWith(name) || shortName(key).startsWith(name)));
  if (found !== undefined) return found;
  throw new ConfigError(`There is no session "${name}" in this project.`, {
    fix:
      keys.length > 0
        ? `Its sessions: ${keys.slice(0, 10).join(", ")}${keys.length > 10 ? ", …" : ""} (\`cordon sessions list\`; \`--workspace\` picks the project).`
        : "Run `cordon sessions list --all` to see every project's sessions; `--workspace` picks the project.",
  });
}
