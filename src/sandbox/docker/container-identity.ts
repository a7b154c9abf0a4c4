import { labelKeys } from "./container-options.js";
import type { SandboxRecord } from "./records.js";

export type Labels = Readonly<Record<string, string>>;

/**
 * What a container is, as its labels say it: for every container its own labels, except a pool
 * member that was taken for a sandbox. Docker cannot relabel a container, so a taken member keeps
 * the labels it was made with (scope `pool:<shape>`) and its record, written by the process that
 * took it, says whose it is now. The record counts only for the container id it names: a record
 * left over from an earlier container of that name changes nothing, and a member nobody took
 * keeps its pool labels.
 *
 * The record lives in the state directory, which no container can reach; the labels come from
 * Docker. Neither is agent data.
 */
export function labelsOf(
  container: { id: string; labels: Labels },
  record: SandboxRecord | undefined,
): Labels {
  const labels = container.labels;
  if (labels[labelKeys.pool] === undefined) return labels;
  const pooled = record?.pooled;
  if (!pooled || record.containerId !== container.id) return labels;
  const claimed: Record<string, string> = {
    ...labels,
    [labelKeys.scope]: pooled.scope,
    [labelKeys.scopeKey]: record.scopeKey,
    [labelKeys.agent]: pooled.agentId,
    [labelKeys.session]: pooled.sessionKey,
    [labelKeys.configHash]: record.configHash,
  };
  if (record.privateWorkspace) claimed[labelKeys.privateWorkspace] = record.privateWorkspace;
  return claimed;
}
