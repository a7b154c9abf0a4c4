import { stateDirectory } from "../common/index.js";
import { findSession } from "../runner/index.js";
import type { CliContext } from "./context.js";
import { runnerFromFlags, type PlanFlags } from "./runner-flags.js";

/**
 * The session a name means in the project of these flags: a full key, the name a run's
 * `--session` takes, or a unique prefix of either (see `findSession`).
 */
export async function resolveSession(
  context: CliContext,
  flags: Omit<PlanFlags, "session">,
  name: string,
): Promise<{ stateDir: string; project: string; sessionKey: string }> {
  const stateDir = stateDirectory(context.env);
  const plan = await runnerFromFlags(context, flags).plan({ agentId: flags.agent });
  const project = plan.agent.workspaceId;
  const runKey = name.startsWith("agent:") ? name : `agent:${plan.agent.id}:${name}`;
  return { stateDir, project, sessionKey: await findSession({ stateDir, project, name, runKey }) };
}
