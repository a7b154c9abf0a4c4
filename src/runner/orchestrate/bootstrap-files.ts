import { bootstrapFilesFor, type RunPlan } from "../../policy/index.js";
import type { Sandbox } from "../../sandbox/index.js";
import type { BootstrapFile } from "../loop/index.js";

/** A bootstrap file larger than this is not read at all (the cap keeps far less of it anyway). */
const readLimitBytes = 1024 * 1024;

/** Where the agent workspace is mounted read-only (workspace access `ro`), e.g. `/agent`. */
export function agentMountPath(plan: RunPlan): string | undefined {
  return plan.sandbox.spec?.mounts.find((mount) => mount.role === "agent-workspace")?.target;
}

/**
 * The workspace's bootstrap files (AGENTS.md, SOUL.md, … as configured, as the prompt mode
 * wants them), each cut to `bootstrap.maxBytes`. The workspace is hostile data, so every file is
 * read through the sandbox: in a container (the seeded copy or the read-only mount) the
 * container's filesystem is the only one a link can point into; on the host (mode off) the host
 * sandbox refuses a link that leaves the workspace. A file that is missing, a directory, over
 * 1 MiB or unreadable is left out.
 */
export async function readBootstrapFiles(
  plan: RunPlan,
  sandbox: Sandbox,
  signal: AbortSignal | undefined,
): Promise<BootstrapFile[]> {
  const { files, maxBytes } = plan.agent.bootstrap;
  const base = plan.sandbox.workspaceAccess === "ro" ? agentMountPath(plan) : undefined;
  const read: BootstrapFile[] = [];
  for (const name of bootstrapFilesFor(plan.agent.promptMode, files)) {
    let bytes: Uint8Array;
    try {
      // One read, no stat first: this is on every run's start, and a missing file is the usual case.
      bytes = await sandbox.files.readFile(base ? `${base}/${name}` : name, {
        signal,
        maxBytes: readLimitBytes,
      });
    } catch {
      continue;
    }
    const end = utf8Boundary(bytes, maxBytes);
    read.push({
      name,
      content: new TextDecoder().decode(bytes.subarray(0, end)),
      omittedBytes: bytes.length > end ? bytes.length - end : undefined,
    });
  }
  return read;
}

/** The largest cut at or below `max` bytes that does not split a UTF-8 character. */
function utf8Boundary(bytes: Uint8Array, max: number): number {
  if (bytes.length <= max) return bytes.length;
  let end = max;
  // Continuation bytes are 10xxxxxx: back up to the start of the character that would be cut.
  while (end > 0 && ((bytes[end] ?? 0) & 0xc0) === 0x80) end--;
  return end;
}
