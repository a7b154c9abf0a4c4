import { readFileSync } from "node:fs";
import os from "node:os";

/**
 * Who a process is, beyond its pid: pids are reused, so a record that outlives its process (a lock
 * file, a marker) also carries when the process started (clock ticks since boot, from
 * `/proc/<pid>/stat`) and which boot that was. Where /proc is missing (macOS), only the pid and
 * host are known and a reused pid looks alive: the safe side for a lock (it waits, never steals).
 */
export interface ProcessIdentity {
  pid: number;
  /** `os.hostname()`: a pid says nothing about a process on another machine. */
  host: string;
  /** Start time in clock ticks since boot (field 22 of /proc/<pid>/stat); absent without /proc. */
  startTicks?: number | undefined;
  /** /proc/sys/kernel/random/boot_id; absent without /proc. */
  bootId?: string | undefined;
}

/** True when a process with this pid exists (EPERM: it does, as another user's). */
export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}

function readProc(file: string): string | undefined {
  try {
    return readFileSync(file, "utf8");
  } catch {
    return undefined;
  }
}

/** Field 22 of /proc/<pid>/stat, or undefined when there is no such process or no /proc. */
export function processStartTicks(pid: number): number | undefined {
  const stat = readProc(`/proc/${pid}/stat`);
  if (stat === undefined) return undefined;
  // Field 2, the command name, is in parentheses and may itself hold spaces and ")": the fields
  // after the last ")" start at field 3, so starttime (22) is the 20th of them.
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  const ticks = Number(fields[19]);
  return Number.isSafeInteger(ticks) ? ticks : undefined;
}

function currentBootId(): string | undefined {
  return readProc("/proc/sys/kernel/random/boot_id")?.trim() || undefined;
}

/** The identity of this process. */
export function currentProcessIdentity(): ProcessIdentity {
  return {
    pid: process.pid,
    host: os.hostname(),
    startTicks: processStartTicks(process.pid),
    bootId: currentBootId(),
  };
}

/**
 * Whether the process a record names still runs: `"alive"`, `"dead"` (gone, or its pid now
 * belongs to a process started later or in another boot), or `"unknown"` (another host).
 */
export function processState(identity: ProcessIdentity): "alive" | "dead" | "unknown" {
  if (identity.host !== os.hostname()) return "unknown";
  if (identity.bootId !== undefined) {
    const boot = currentBootId();
    if (boot !== undefined && boot !== identity.bootId) return "dead";
  }
  if (!isAlive(identity.pid)) return "dead";
  if (identity.startTicks !== undefined) {
    const ticks = processStartTicks(identity.pid);
    if (ticks !== undefined && ticks !== identity.startTicks) return "dead";
  }
  return "alive";
}
