import { createHash } from "node:crypto";
import path from "node:path";

import type { SandboxScope } from "../sandbox/index.js";

/** Docker allows longer names; 63 keeps them usable as DNS labels and hostnames. */
export const maxContainerNameLength = 63;
const hashLength = 12;
/** Hex digits of the workspace id: 64 bits, so no directory name can be made to collide. */
const workspaceIdLength = 16;
/** Room the project's directory name may take in a container name, so the scope part still shows. */
const maxProjectSlugLength = 20;

function sha256(text: string): string {
  return createHash("sha256").update(text).digest("hex");
}

/**
 * The project a sandbox belongs to: a hash of the agent workspace's real path (symlinks resolved,
 * so two spellings of one directory are one project and a link cannot pass for another).
 */
export function workspaceIdOf(realWorkspace: string): string {
  return sha256(realWorkspace).slice(0, workspaceIdLength);
}

/**
 * Which sessions share a container: `session:<key>@<workspace id>`, `agent:<id>@<workspace id>`
 * or `shared@<workspace id>`. Every scope is per project: a session named `main` in project B
 * never finds project A's container, its seeded copy or its changes, and `shared` means "every
 * agent and session working on this project", since one container mounts or seeds one workspace.
 */
export function scopeKeyOf(
  scope: SandboxScope,
  agentId: string,
  sessionKey: string,
  workspaceId: string,
): string {
  const sharers = { session: `session:${sessionKey}`, agent: `agent:${agentId}`, shared: "shared" };
  return `${sharers[scope]}@${workspaceId}`;
}

function slugOf(text: string): string {
  return text
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, "-")
    .replace(/^-+|-+$/g, "");
}

/**
 * `<prefix>-<project>-<sharers>-<hash>`, e.g. `cordon-shop-session-agent-main-main-3f9a0c2b7d1e`:
 * readable in `docker ps`, Docker-safe ([a-z0-9-]), at most 63 characters, and stable. The
 * readable part is cut to fit; the hash covers the full scope key (workspace id included) and the
 * state directory, so keys that only differ after the cut, or in characters the slug drops
 * (`a:b` vs `a/b`), still get different names, and two state directories on one engine never
 * fight over a container.
 */
export function containerNameOf(input: {
  prefix: string;
  scopeKey: string;
  stateDir: string;
  /** The real agent workspace: its directory name goes into the readable part. */
  workspace?: string | undefined;
}): string {
  const hash = sha256(`${input.stateDir}\0${input.scopeKey}`).slice(0, hashLength);
  const room = maxContainerNameLength - input.prefix.length - hash.length - 2;
  // The workspace id is in the hash; spelling it out again would only crowd out the session.
  const sharers = input.scopeKey.replace(/@[0-9a-f]+$/, "");
  const project =
    input.workspace === undefined
      ? ""
      : slugOf(path.posix.basename(input.workspace))
          .slice(0, maxProjectSlugLength)
          .replace(/-+$/, "");
  const slug = [project, slugOf(sharers)]
    .filter(Boolean)
    .join("-")
    .slice(0, Math.max(0, room))
    .replace(/-+$/g, "");
  return slug ? `${input.prefix}-${slug}-${hash}` : `${input.prefix}-${hash}`;
}
