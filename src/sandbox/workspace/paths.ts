import path from "node:path";

/** The folder under the state directory that holds every private workspace. */
export const workspacesFolder = "workspaces";

/** `<stateDir>/workspaces`: where private workspaces live, and where prune looks for orphans. */
export function privateWorkspaceRoot(stateDirectory: string): string {
  return path.join(stateDirectory, workspacesFolder);
}

/**
 * The conventional private workspace of a container: `<stateDir>/workspaces/<containerName>`.
 * The policy layer should put `SandboxSpec.privateWorkspace` here, so prune finds orphans.
 */
export function privateWorkspacePath(stateDirectory: string, containerName: string): string {
  return path.join(privateWorkspaceRoot(stateDirectory), containerName);
}

/** True when `child` is `parent` itself or below it (lexically; resolve symlinks first). */
export function isInside(parent: string, child: string): boolean {
  const relative = path.relative(parent, child);
  return relative === "" || (!relative.startsWith("..") && !path.isAbsolute(relative));
}

/** True when `child` is strictly below `parent`. */
export function isStrictlyInside(parent: string, child: string): boolean {
  return isInside(parent, child) && path.relative(parent, child) !== "";
}

/**
 * The seed marker of a private workspace: a hidden file beside it (never inside, where it would
 * show up in the agent's `git status` and in the reviewed diff).
 */
export function seedMarkerPath(workspace: string): string {
  return path.join(path.dirname(workspace), `.${path.basename(workspace)}.seed.json`);
}

/** Prefix of the temporary directories a seed is built in before it is renamed into place. */
export function seedTempPrefix(workspace: string): string {
  return path.join(path.dirname(workspace), `.${path.basename(workspace)}.seeding-`);
}

/**
 * The baseline git dir of a private workspace: a hidden directory beside it (never inside, where
 * the agent could rewrite what its changes are compared against), readable by cordon only.
 */
export function baselineGitDir(workspace: string): string {
  return path.join(path.dirname(workspace), `.${path.basename(workspace)}.baseline.git`);
}
