import { describeHolder } from "./session-lock.js";
import { listLockedSessions, readRunActivity } from "./active-runs.js";

/** What runs in progress (of any cordon process) hold, from their session locks. */
export interface HeldSandboxes {
  /**
   * Why the sandbox must not be stopped or removed now (the run that holds it), or undefined.
   * `session` is the sandbox's session label: a run that has not reported its sandbox yet holds
   * every sandbox of its session.
   */
  holderOf(sandbox: { name: string; session: string }): string | undefined;
}

/**
 * The sandboxes live runs hold: a run's `sandbox-ready` event names its container (as `cordon ps`
 * shows it); a run still acquiring holds its session's. A run on another host counts as live:
 * cordon cannot tell it has ended.
 */
export async function sandboxesHeldByRuns(stateDir: string): Promise<HeldSandboxes> {
  const byContainer = new Map<string, string>();
  const bySession = new Map<string, string>();
  for (const locked of await listLockedSessions({ stateDir })) {
    if (locked.state === "dead") continue;
    const holder = `held by the run of session ${locked.holder.sessionKey} (${describeHolder(locked.holder)})`;
    const activity = await readRunActivity(locked.eventsFile, locked.holder.runId).catch(
      () => undefined,
    );
    if (activity?.sandbox) byContainer.set(activity.sandbox, holder);
    else bySession.set(locked.holder.sessionKey, holder);
  }
  return {
    holderOf: ({ name, session }) => byContainer.get(name) ?? bySession.get(session),
  };
}
