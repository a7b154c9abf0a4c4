import { ConfigError } from "../common/index.js";
import { listSessions, type Runner } from "../runner/index.js";

/**
 * `cordon run --continue`: the session to go on with — the one `--session` names, else this
 * project's most recently used session of the agent, as `claude -c` and `codex resume --last`
 * pick theirs. No session yet is an error that says how to start one.
 */
export async function sessionToContinue(
  runner: Runner,
  request: { agentId?: string | undefined; sessionKey?: string | undefined },
): Promise<string> {
  if (request.sessionKey !== undefined) return request.sessionKey;
  const plan = await runner.plan({ agentId: request.agentId });
  const own = `agent:${plan.agent.id}:`;
  const sessions = await listSessions({
    stateDir: runner.stateDir,
    project: plan.agent.workspaceId,
  });
  const latest = sessions.find((session) => session.sessionKey.startsWith(own));
  if (!latest) {
    throw new ConfigError(
      `--continue: agent "${plan.agent.id}" has no session in ${plan.agent.workspace} yet`,
      { fix: 'start one with `cordon run "TASK"` (or name one with --session)' },
    );
  }
  return latest.sessionKey;
}
