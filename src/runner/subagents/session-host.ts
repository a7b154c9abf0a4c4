import { randomUUID } from "node:crypto";
import { rm } from "node:fs/promises";

import { PolicyDeniedError, messageOf, type Logger } from "../../common/index.js";
import { normalizeAgentId } from "../../config/index.js";
import {
  agentOfSessionKey,
  childSandboxRefusal,
  normalizeSessionKey,
  spawnRefusal,
  subagentSessionKey,
  visibilityRefusal,
  type SessionRequester,
} from "../../policy/index.js";
import type {
  ChildRunResult,
  HistoryEntry,
  SessionCallOptions,
  SessionListing,
  SessionToolHost,
  SubagentOutcome,
} from "../../tools/index.js";
import { ToolCallDeadline, type RunResult } from "../loop/index.js";
import type { ContentBlock } from "../model/index.js";
import type { RunPlan } from "../../policy/index.js";
import type { RunnerEvent } from "../orchestrate/index.js";
import {
  acquireSessionLock,
  listSessions,
  readSessionEntries,
  sessionDetails,
  sessionFiles,
} from "../session/index.js";
import { readRunRecords, writeRunRecord, type SubagentRunRecord } from "./run-records.js";

/** A run the host starts on another session (a spawned child, or a message sent). */
export interface ChildRunRequest {
  prompt: string;
  agentId: string;
  sessionKey: string;
  modelId?: string | undefined;
  timeoutMs?: number | undefined;
  signal: AbortSignal;
  onEvent: (event: RunnerEvent) => void;
}

export interface SessionHostOptions {
  stateDir: string;
  /** The requesting run: its plan (with `subagents`) and run id. */
  plan: RunPlan;
  runId: string;
  /** The requesting run's event stream; child events arrive in it wrapped as `subagent`. */
  emit: (event: RunnerEvent) => void;
  /** The plan of another session (no side effects): the child's sandbox and project. */
  planSession(request: { agentId: string; sessionKey: string }): Promise<RunPlan>;
  /** Runs on another session, in the subagent lane (not the requester's global slot). */
  runChild(request: ChildRunRequest): Promise<RunResult>;
  /** Removes a session's sandbox (container and private workspace), for cleanup "delete". */
  discardSandbox(request: { agentId: string; sessionKey: string }): Promise<void>;
  logger: Logger;
}

/** Events of a child not forwarded to the parent's stream: per-token noise. */
const unforwarded = new Set(["text-delta", "thinking-delta"]);

/** Characters of one history entry the model gets back. */
const maxEntryChars = 4000;

/**
 * The session tools' host for one run: every request is checked against the run's plan
 * (policy/subagent-policy.ts) before anything happens; children run through `runChild`, with
 * their events nested in the requester's stream and a run record kept for each spawn.
 */
export function createSessionHost(options: SessionHostOptions): SessionToolHost {
  const { plan, stateDir } = options;
  const requester = requesterOf(plan);

  const denied = (message: string, fix?: string): PolicyDeniedError =>
    new PolicyDeniedError(message, fix === undefined ? {} : { fix });

  /** The requester's records, and whether it spawned `sessionKey`. */
  const ownRecords = async (): Promise<SubagentRunRecord[]> =>
    (await readRunRecords(stateDir)).filter(
      (record) =>
        record.requesterSessionKey === plan.sessionKey &&
        record.requesterProject === plan.agent.workspaceId,
    );

  /** A key as the model wrote it, checked and made whole (a bare name is the requester's agent). */
  const targetKey = (written: string): { sessionKey: string; agentId: string } => {
    const agentId = written.startsWith("agent:") ? agentOfSessionKey(written) : requester.agentId;
    if (agentId === undefined) {
      throw denied(`"${written}" is not a session key (agent:<id>:<name>).`);
    }
    return { sessionKey: normalizeSessionKey(agentId, written), agentId };
  };

  const checkVisible = async (sessionKey: string): Promise<SubagentRunRecord | undefined> => {
    const record = (await ownRecords()).findLast((r) => r.childSessionKey === sessionKey);
    const refusal = visibilityRefusal(requester, {
      sessionKey,
      spawnedByRequester: record !== undefined,
    });
    if (refusal !== undefined) throw denied(refusal);
    return record;
  };

  /** Runs on another session with its events nested in ours; the run's end as the tool sees it. */
  const runNested = async (
    target: { agentId: string; sessionKey: string; label?: string | undefined },
    prompt: string,
    extra: { modelId?: string | undefined; timeoutSec?: number | undefined },
    call: SessionCallOptions,
  ): Promise<{ result: RunResult; outcome: SubagentOutcome }> => {
    const result = await options.runChild({
      prompt,
      agentId: target.agentId,
      sessionKey: target.sessionKey,
      modelId: extra.modelId,
      timeoutMs: extra.timeoutSec === undefined ? undefined : extra.timeoutSec * 1000,
      signal: call.signal,
      onEvent: (event) => {
        if (unforwarded.has(event.type)) return;
        options.emit({
          type: "subagent",
          childRunId: event.type === "run-start" ? event.runId : undefined,
          sessionKey: target.sessionKey,
          agentId: target.agentId,
          label: target.label,
          toolCallId: call.toolCallId,
          event,
        });
      },
    });
    return { result, outcome: outcomeOf(result, call.signal) };
  };

  return {
    async spawn(request, call) {
      const agentId = normalizeAgentId(request.agentId ?? requester.agentId);
      const refusal = spawnRefusal(requester, agentId);
      if (refusal !== undefined) throw denied(refusal);
      const runId = randomUUID();
      const sessionKey = subagentSessionKey(agentId, runId.replaceAll("-", "").slice(0, 12));
      const child = await options.planSession({ agentId, sessionKey });
      const sandboxRefusal = childSandboxRefusal(requester, {
        agentId,
        sandboxed: child.sandbox.enabled,
        modeKey: child.sandbox.keys.mode,
      });
      if (sandboxRefusal !== undefined) throw denied(sandboxRefusal);

      const modelId = request.model ?? requester.subagents.model;
      const record: SubagentRunRecord = {
        v: 1,
        runId,
        childSessionKey: sessionKey,
        childAgentId: agentId,
        childProject: child.agent.workspaceId,
        requesterSessionKey: plan.sessionKey,
        requesterAgentId: requester.agentId,
        requesterProject: plan.agent.workspaceId,
        requesterRunId: options.runId,
        task: request.task,
        cleanup: request.cleanup,
        createdAt: new Date().toISOString(),
        ...(request.label !== undefined ? { label: request.label } : {}),
        ...(modelId !== undefined ? { model: modelId } : {}),
      };
      await writeRunRecord(stateDir, record);
      let ended: { result: RunResult; outcome: SubagentOutcome } | undefined;
      let deleted = false;
      try {
        ended = await runNested(
          { agentId, sessionKey, label: request.label },
          request.task,
          { modelId, timeoutSec: request.timeoutSec },
          call,
        );
        if (request.cleanup === "delete") {
          deleted = await deleteSession(options, {
            agentId,
            sessionKey,
            project: child.agent.workspaceId,
          });
        }
      } finally {
        const done: SubagentRunRecord = {
          ...record,
          endedAt: new Date().toISOString(),
          outcome: ended?.outcome ?? "error",
          status: ended?.result.status ?? "internal_error",
          ...(ended?.result.message !== undefined ? { message: ended.result.message } : {}),
          ...(deleted ? { deleted } : {}),
        };
        await writeRunRecord(stateDir, done).catch((error: unknown) => {
          options.logger.warn({ err: messageOf(error) }, "could not record a subagent's end");
        });
      }
      if (!ended) throw new Error("unreachable: the child run neither ended nor threw");
      return childRunResult(ended.result, ended.outcome, { agentId, sessionKey, deleted });
    },

    async send(request, call) {
      const target = targetKey(request.sessionKey);
      if (target.sessionKey === plan.sessionKey) {
        throw denied(
          `${target.sessionKey} is this session: a message to it would wait for this very run.`,
          "send to another session; sessions_list shows those you may reach",
        );
      }
      await checkVisible(target.sessionKey);
      const targetPlan = await options.planSession(target);
      const sandboxRefusal = childSandboxRefusal(
        requester,
        {
          ...target,
          sandboxed: targetPlan.sandbox.enabled,
          modeKey: targetPlan.sandbox.keys.mode,
        },
        "send",
      );
      if (sandboxRefusal !== undefined) throw denied(sandboxRefusal);
      const { result, outcome } = await runNested(
        target,
        request.message,
        { timeoutSec: request.timeoutSec },
        call,
      );
      return childRunResult(result, outcome, target);
    },

    async list(request, call) {
      const own = await ownRecords();
      const spawned = new Map(own.map((record) => [record.childSessionKey, record]));
      const allRecords = await readRunRecords(stateDir);
      const parentOf = new Map(allRecords.map((r) => [r.childSessionKey, r]));
      const listings = new Map<string, SessionListing>();
      const onlySpawned = requester.sandboxed && requester.subagents.visibility === "spawned";
      if (!onlySpawned) {
        const found = await listSessions({
          stateDir,
          project: plan.agent.workspaceId,
          signal: call.signal,
        });
        for (const summary of found) {
          const refusal = visibilityRefusal(requester, {
            sessionKey: summary.sessionKey,
            spawnedByRequester: spawned.has(summary.sessionKey),
          });
          if (refusal !== undefined) continue;
          const details = await sessionDetails(stateDir, summary);
          const record = parentOf.get(summary.sessionKey);
          listings.set(summary.sessionKey, {
            sessionKey: summary.sessionKey,
            agentId: details.agentId,
            spawnedBy: record?.requesterSessionKey,
            label: record?.label,
            status: details.lastRunStatus ?? record?.outcome,
            updatedAt: details.lastActivityAt.toISOString(),
          });
        }
      }
      for (const record of own) {
        if (listings.has(record.childSessionKey)) continue;
        listings.set(record.childSessionKey, {
          sessionKey: record.childSessionKey,
          agentId: record.childAgentId,
          spawnedBy: record.requesterSessionKey,
          label: record.label,
          status: record.deleted ? "deleted" : (record.outcome ?? "running"),
          updatedAt: record.endedAt ?? record.createdAt,
        });
      }
      return [...listings.values()]
        .sort((a, b) => b.updatedAt.localeCompare(a.updatedAt))
        .slice(0, request.limit);
    },

    async history(request, call) {
      const target = targetKey(request.sessionKey);
      const record = await checkVisible(target.sessionKey);
      const project = record?.childProject ?? (await options.planSession(target)).agent.workspaceId;
      const entries = await readSessionEntries({
        stateDir,
        sessionKey: target.sessionKey,
        project,
        signal: call.signal,
      });
      const shown: HistoryEntry[] = [];
      for (const entry of entries) {
        const text = entryText(entry.content, request.includeTools);
        if (text === "") continue;
        const role = entry.kind === "message" ? entry.role : entry.kind;
        shown.push({ role, text: cutEntry(text), ts: entry.ts });
      }
      return {
        sessionKey: target.sessionKey,
        entries: shown.slice(-request.limit),
        total: shown.length,
      };
    },
  };
}

/** The requester as the policy's decisions take it. */
function requesterOf(plan: RunPlan): SessionRequester {
  return {
    agentId: plan.agent.id,
    sessionKey: plan.sessionKey,
    sandboxed: plan.sandbox.enabled,
    subagents: plan.subagents,
  };
}

/**
 * ok: the child completed; timeout: its own limit or the spawn call's (tools.callTimeoutSec)
 * stopped it; error: anything else.
 */
function outcomeOf(result: RunResult, signal: AbortSignal): SubagentOutcome {
  if (result.status === "completed") return "ok";
  if (result.status === "timeout") return "timeout";
  const callTimedOut = signal.aborted && signal.reason instanceof ToolCallDeadline;
  return result.status === "aborted" && callTimedOut ? "timeout" : "error";
}

function childRunResult(
  result: RunResult,
  outcome: SubagentOutcome,
  target: { agentId: string; sessionKey: string; deleted?: boolean },
): ChildRunResult {
  return {
    runId: result.runId,
    sessionKey: target.sessionKey,
    agentId: target.agentId,
    outcome,
    status: result.status,
    finalText: result.finalText,
    message: result.message,
    fix: result.fix,
    turns: result.turns,
    durationMs: result.durationMs,
    deleted: target.deleted,
  };
}

/**
 * Removes a finished child's transcript and events (held like a run holds them, so nothing is
 * writing) and its sandbox. False when that failed: the record then says it was kept.
 */
async function deleteSession(
  options: SessionHostOptions,
  target: { agentId: string; sessionKey: string; project: string | undefined },
): Promise<boolean> {
  try {
    const lock = await acquireSessionLock({
      stateDir: options.stateDir,
      sessionKey: target.sessionKey,
      project: target.project,
      runId: `subagent-cleanup-${randomUUID()}`,
      wait: false,
    });
    try {
      const files = sessionFiles(options.stateDir, target.sessionKey, target.project);
      await rm(files.transcript, { force: true });
      await rm(files.events, { force: true });
    } finally {
      await lock.release();
    }
    await options.discardSandbox(target);
    return true;
  } catch (error) {
    options.logger.warn({ err: messageOf(error) }, "could not delete a subagent's session");
    return false;
  }
}

function entryText(content: readonly ContentBlock[], includeTools: boolean): string {
  const parts: string[] = [];
  for (const block of content) {
    if (block.type === "text") parts.push(block.text);
    else if (block.type === "image") parts.push("[image]");
    else if (!includeTools) continue;
    else if (block.type === "tool_use") {
      parts.push(`[tool call ${block.name}] ${JSON.stringify(block.input)}`);
    } else if (block.type === "tool_result") {
      const text = block.content.map((c) => (c.type === "text" ? c.text : "[image]")).join("\n");
      parts.push(`[tool result${block.isError ? ", error" : ""}] ${text}`);
    }
  }
  return parts.join("\n").trim();
}

function cutEntry(text: string): string {
  return text.length <= maxEntryChars
    ? text
    : `${text.slice(0, maxEntryChars)} [… ${text.length - maxEntryChars} more characters]`;
}
