/**
 * What changes when a sandbox runs under gVisor (`sandbox.docker.runtime: "runsc"`): the one
 * place that knows a runtime is gVisor's and what that does to the container options. See
 * docs/gvisor.md for the trade-off.
 */

/** `runsc` as scripts/setup.sh registers it, or any runtime name that says gVisor. */
export function isGvisorRuntime(runtime: string | undefined): boolean {
  return runtime !== undefined && /^runsc(\b|[-_.])|gvisor/i.test(runtime);
}

/**
 * The platform gVisor's sentry runs on, read from the runtime's registered arguments: `kvm` where
 * setup found the KVM platform starts sandboxes, `ptrace` otherwise (the default of the runsc
 * Debian ships, and what setup registers when KVM hangs, as it does in nested VMs).
 */
export function gvisorPlatform(runtimeArgs: readonly string[]): string {
  const flag = runtimeArgs.find((arg) => arg.startsWith("--platform="));
  return flag ? flag.slice("--platform=".length) : "ptrace";
}

/**
 * Host tasks (threads) of gVisor's sentry per sandboxed process, measured on the ptrace
 * platform: 53 for an idle sandbox, 7–9 more per live process. Docker's pids limit counts
 * these host tasks, not the sandbox's processes, and when the sentry cannot create a thread it
 * panics and the whole sandbox dies instead of a fork failing.
 */
const hostTasksPerProcess = 16;
const hostTasksIdle = 64;

/**
 * The limits of a gVisor sandbox for `pidsLimit` processes: inside, RLIMIT_NPROC (gVisor's
 * kernel counts only this sandbox's tasks, and a fork past it fails with EAGAIN, as the pids
 * cgroup does under runc); outside, a Docker pids limit sized for the sentry's threads, so the
 * host stays bounded without the sandbox dying on an ordinary fork.
 */
export function gvisorProcessLimits(
  pidsLimit: number,
  nproc: { soft: number; hard: number } | undefined,
): { hostPidsLimit: number; nproc: { soft: number; hard: number } } {
  return {
    hostPidsLimit: hostTasksIdle + pidsLimit * hostTasksPerProcess,
    nproc: {
      soft: Math.min(pidsLimit, nproc?.soft ?? pidsLimit),
      hard: Math.min(pidsLimit, nproc?.hard ?? pidsLimit),
    },
  };
}

/** What explain and doctor say about the boundary under gVisor. */
export const gvisorBoundaryNote =
  "gVisor: its user-space kernel is the boundary; Docker's seccomp profile is not applied under it";
