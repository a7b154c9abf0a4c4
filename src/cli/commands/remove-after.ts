import { messageOf } from "../../common/index.js";
import type { RunPlan } from "../../policy/index.js";
import type { PlanRequest, Runner } from "../../runner/index.js";
import type { CliContext } from "../context.js";

/**
 * `--rm` (run, exec): removes the sandbox the command used, its container and private copy, once
 * the command has ended however it ended — unless a run of another process holds it right now
 * (a sandbox shared by scope agent or shared), which keeps it and says so. A failure to remove is
 * reported and leaves the command's exit code alone: the command's outcome is what it was.
 */
export async function removeSandboxAfter(
  context: CliContext,
  runner: Runner,
  plan: RunPlan,
  request: PlanRequest,
  options: { quiet?: boolean | undefined } = {},
): Promise<void> {
  const say = (line: string): void => {
    if (!options.quiet) context.stderr(line);
  };
  const spec = plan.sandbox.spec;
  if (!plan.sandbox.enabled || !spec) return;
  try {
    const done = await runner.disposeSandbox(request, "remove");
    if (done?.outcome === "kept") say(`· --rm: kept ${spec.containerName}, ${done.reason ?? ""}\n`);
    else say(`· --rm: removed ${spec.containerName} and its private copy\n`);
  } catch (error) {
    context.stderr(`cordon: --rm could not remove ${spec.containerName}: ${messageOf(error)}\n`);
  }
}
