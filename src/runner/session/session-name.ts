import path from "node:path";
import { ConfigError } from "../../common/index.js";

/** Longest session key we store; file names stay well below the usual 255-byte limit. */
const maxKeyLength = 120;

/**
 * A file name for a session key that is safe on every filesystem and reversible: letters, digits,
 * `-` and `_` stay, every other UTF-8 byte becomes `~XX`. So `agent:main:fix/1` is
 * `agent~3Amain~3Afix~2F1`, and no key can name a path outside the sessions directory.
 */
export function sessionFileName(sessionKey: string): string {
  if (sessionKey.length === 0 || sessionKey.length > maxKeyLength) {
    throw new ConfigError(
      `The session key must have 1 to ${maxKeyLength} characters, got ${sessionKey.length}.`,
      { fix: "Choose a shorter --session name." },
    );
  }
  let name = "";
  for (const byte of Buffer.from(sessionKey, "utf8")) {
    const char = String.fromCharCode(byte);
    name += /[A-Za-z0-9_-]/.test(char)
      ? char
      : `~${byte.toString(16).toUpperCase().padStart(2, "0")}`;
  }
  return `${name}.jsonl`;
}

/** The session key of a file name made by `sessionFileName`, or undefined for other files. */
export function sessionKeyOf(fileName: string): string | undefined {
  if (!fileName.endsWith(".jsonl")) return undefined;
  const stem = fileName.slice(0, -".jsonl".length);
  if (!/^(?:[A-Za-z0-9_-]|~[0-9A-F]{2})+$/.test(stem)) return undefined;
  const bytes: number[] = [];
  for (let i = 0; i < stem.length;) {
    if (stem[i] === "~") {
      bytes.push(parseInt(stem.slice(i + 1, i + 3), 16));
      i += 3;
    } else {
      bytes.push(stem.charCodeAt(i));
      i += 1;
    }
  }
  return Buffer.from(bytes).toString("utf8");
}

/** `<stateDir>/sessions`: one folder per project below it (see `sessionsDirectory`). */
export function sessionsRoot(stateDir: string): string {
  return path.join(stateDir, "sessions");
}

/**
 * Where the sessions of a project live: `<stateDir>/sessions/<project>`, `project` being the
 * plan's `agent.workspaceId`, so `--session main` in two projects is two conversations (one
 * project's transcript holds its files' contents; another project's agent must never load it).
 * Without a project (embedders with their own keys, tests): `<stateDir>/sessions` itself.
 */
export function sessionsDirectory(stateDir: string, project?: string): string {
  if (project === undefined) return sessionsRoot(stateDir);
  if (!/^[0-9a-f]{1,64}$/.test(project)) {
    throw new ConfigError(`"${project}" is not a project id (hex digits of a workspace hash)`);
  }
  return path.join(sessionsRoot(stateDir), project);
}

/** `<sessions directory>/<safe-name>.jsonl`. */
export function sessionFilePath(stateDir: string, sessionKey: string, project?: string): string {
  return path.join(sessionsDirectory(stateDir, project), sessionFileName(sessionKey));
}

/**
 * The files of one session, side by side in its project's sessions directory: the transcript
 * (`<name>.jsonl`), the events of its runs (`<name>.events.jsonl`, for `cordon logs` and `ps`) and
 * the lock a run holds while it writes them (`<name>.lock`). Only the transcript matches
 * `sessionKeyOf`, so listings see one entry per session.
 */
export function sessionFiles(
  stateDir: string,
  sessionKey: string,
  project?: string,
): { transcript: string; events: string; lock: string } {
  const transcript = sessionFilePath(stateDir, sessionKey, project);
  const stem = transcript.slice(0, -".jsonl".length);
  return { transcript, events: `${stem}.events.jsonl`, lock: `${stem}.lock` };
}
