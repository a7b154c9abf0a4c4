/**
 * The commands that use the state directory's sandboxes and so notice what removed containers
 * left. Not `sandbox list`, `sandbox prune` and `doctor`: they name orphans themselves.
 */
const noticingCommands = new Set([
  "cordon run",
  "cordon exec",
  "cordon tool",
  "cordon diff",
  "cordon apply",
  "cordon fix-tests",
  "cordon sessions",
  "cordon ps",
  "cordon logs",
  "cordon sandbox rm",
]);

/** Whether `command` (`cordon exec`, `cordon sessions list`) notices orphaned workspaces. */
export function noticesOrphans(command: string): boolean {
  const [, first, second] = command.split(" ");
  return (
    noticingCommands.has(command) ||
    (first !== undefined && second !== undefined && noticingCommands.has(`cordon ${first}`))
  );
}
