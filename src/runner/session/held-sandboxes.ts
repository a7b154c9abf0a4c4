import { describeHolder } from "./session-lock.js";
import { listLockedSessions, readRunActivity } from "./active-runs.js";
import { describeForward, liveForwards } from "./forward-records.js";

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

/**
 * What live runs and live port forwards hold: a stop or removal would cut the server a
 * `cordon port-forward` is showing, so a forwarded sandbox is held like one a run uses. A
 * rollback asks only `sandboxesHeldByRuns`: it changes files, and the forward carries on.
 */
export async function sandboxesHeld(stateDir: string): Promise<HeldSandboxes> {
  const [runs, forwards] = await Promise.all([
    sandboxesHeldByRuns(stateDir),
    liveForwards(stateDir),
  ]);
  const byForward = new Map<string, string>();
  for (const forward of forwards) {
    byForward.set(forward.sandbox, `held by cordon port-forward ${describeForward(forward)}`);
  }
  return { holderOf: (sandbox) => runs.holderOf(sandbox) ?? byForward.get(sandbox.name) };
}
