/**
 * What a sandbox's resident executor says of the processes in its container, asked right before
 * and right after a turn's checkpoint is recorded (docker-workspace-checkpoints.ts). Only cordon
 * starts processes in a sandbox (a command over the executor, a Docker exec, another cordon
 * process's executor), and every process the agent started is one of them or their descendant:
 * when none but init, the keep-alive and this executor lived before the record and none was made
 * until after it, nothing but cordon's own frames could write the copy meanwhile, so the record is
 * one state without pausing the sandbox — and no process held a file mapped for writing, whose
 * writes can change a file without changing its ctime (see checkpoint-copy.sh's kept index). Init
 * and the keep-alive run as a uid of their own (DockerSettings.initUser), so the agent cannot
 * ptrace one into mapping a file for it.
 */
export interface SandboxQuiet {
  /**
   * Processes in the container besides init and the executor answering, zombies included. The
   * container's keep-alive (`sleep infinity`, init's child, which lives as long as the container)
   * is always one of them.
   */
  others: number;
  /** The pid namespace's last pid allocated; 0 when the kernel does not say (gVisor). */
  lastPid: number;
  /**
   * The executor's children, channels and waiting runs, plus this process's calls on it still in
   * flight when it was asked.
   */
  busy: number;
  /** Frames this process had sent the executor (pings and these questions aside): a counter. */
  requests: number;
}

/** The keep-alive: the one process a container with nothing running has besides init and us. */
const keepAlive = 1;

/**
 * Whether a record taken between `before` and `after` saw one state of an idle sandbox: nothing
 * ran or was in flight at either end, no process was made in between (the last pid did not move),
 * and this process sent the executor nothing in between. Unknown counts as not idle.
 */
export function idleThroughout(
  before: SandboxQuiet | undefined,
  after: SandboxQuiet | undefined,
): boolean {
  if (!before || !after) return false;
  return (
    idleAt(before) &&
    idleAt(after) &&
    after.lastPid === before.lastPid &&
    after.requests === before.requests
  );
}

/** Idle at one moment, with a last pid to compare: worth recording without a pause. */
export function idleAt(quiet: SandboxQuiet | undefined): quiet is SandboxQuiet {
  return quiet !== undefined && quiet.others === keepAlive && quiet.busy === 0 && quiet.lastPid > 0;
}

/** The executor's answer "OTHERS LAST BUSY"; undefined when it is not that. */
export function parseQuiet(
  text: string,
  local: { pending: number; requests: number },
): SandboxQuiet | undefined {
  const match = /^(\d{1,9}) (\d{1,12}) (\d{1,9})$/.exec(text);
  if (!match) return undefined;
  return {
    others: Number(match[1]),
    lastPid: Number(match[2]),
    busy: Number(match[3]) + local.pending,
    requests: local.requests,
  };
}
