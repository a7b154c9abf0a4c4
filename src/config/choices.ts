/**
 * The fixed choices of a few config keys, apart from the schema so that code which only checks a
 * value (the environment check the CLI runs before every command) need not load zod.
 */

/** Which sessions are sandboxed. */
export const sandboxModes = ["off", "non-main", "all"] as const;
/** Which sessions share one container. */
export const sandboxScopes = ["session", "agent", "shared"] as const;
/** How the agent workspace is mounted. */
export const workspaceAccessModes = ["none", "ro", "rw"] as const;
/** Named tool sets (DESIGN.md §4). */
export const toolProfiles = ["minimal", "coding", "full"] as const;
/** Thinking levels, none to most; each level's token budget is in runner/loop/thinking.ts. */
export const thinkingLevels = ["off", "minimal", "low", "medium", "high", "xhigh"] as const;
/** Which sessions the session tools show a sandboxed session. */
export const sessionToolsVisibilities = ["spawned", "all"] as const;
/** When runs record a seeded copy's state (`sandbox.checkpoints`). */
export const checkpointModes = ["turn", "off"] as const;
/** Where a private copy lives (`sandbox.workspaceStorage`); workspace-volumes.ts. */
export const workspaceStorageModes = ["auto", "host", "volume"] as const;
