import { createHash } from "node:crypto";

import type { SandboxScope } from "../sandbox/index.js";

/** Docker allows longer names; 63 keeps them usable as DNS labels and hostnames. */
export const maxContainerNameLength = 63;
const hashLength = 12;

/** Which sessions share a container: `session:<key>`, `agent:<id>` or `shared`. */
export function scopeKeyOf(scope: SandboxScope, agentId: string, sessionKey: string): string {
  switch (scope) {
    case "session":
      return `session:${sessionKey}`;
    case "agent":
      return `agent:${agentId}`;
    case "shared":
      return "shared";
  }
}

/**
 * `<prefix>-<slug>-<hash>`: readable, Docker-safe ([a-z0-9-]), at most 63 characters, and stable.
 * The hash covers the full scope key and the state directory, so keys that only differ after the
 * slug is cut, or in characters the slug drops (`a:b` vs `a/b`), still get different names, and
 * two state directories on one engine never fight over a container.
 */
export function containerNameOf(input: {
  prefix: string;
  scopeKey: string;
  stateDir: string;
}): string {
  const hash = createHash("sha256")
    .update(`${input.stateDir}\0${input.scopeKey}`)
    .digest("hex")
    .slice(0, hashLength);
  const room = maxContainerNameLength - input.prefix.length - hash.length - 2;
  const slug = input.scopeKey
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, "-")
    .replace(/^-+|-+$/g, "")
    .slice(0, Math.max(0, room))
    .replace(/-+$/g, "");
  return slug ? `${input.prefix}-${slug}-${hash}` : `${input.prefix}-${hash}`;
}
