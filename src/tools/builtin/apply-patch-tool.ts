import { z } from "zod";
import { describeToolError } from "../tool-errors.js";
import { withPathLocks } from "../path-lock.js";
import {
  applyHunks,
  parsePatch,
  PatchParseError,
  type FilePatch,
  type Hunk,
} from "../patch/index.js";
import { resolveToolPath, sessionStateFor } from "../session-state.js";
import { decodeText } from "../text-format.js";
import {
  defineTool,
  errorResult,
  textResult,
  type ToolContext,
  type ToolResult,
} from "../tool-definition.js";
import { limits } from "./limits.js";
import { recordWritten } from "./stale-check.js";

const inputSchema = z.strictObject({
  patch: z
    .string()
    .min(1)
    .describe(
      "A unified diff (git diff format), one or more files: --- a/path, +++ b/path, @@ hunks.",
    ),
});

export const applyPatchTool = defineTool({
  name: "apply_patch",
  description: [
    "Apply a unified diff (as `git diff` prints it) to one or more files: modify, add (--- /dev/null), delete (+++ /dev/null) and rename (rename from/rename to).",
    "Paths are relative to the working directory (a/ and b/ prefixes are stripped). Hunks may be a few lines off; context must match (whitespace differences are tolerated).",
    "All or nothing: if any hunk does not apply, no file is changed and the result lists each failing hunk and why.",
  ].join("\n"),
  inputSchema,
  async execute(input, context): Promise<ToolResult> {
    let files: FilePatch[];
    try {
      files = parsePatch(input.patch);
    } catch (error) {
      if (error instanceof PatchParseError) {
        return errorResult(`Could not read the patch (${error.message}). Nothing was changed.`);
      }
      throw error;
    }
    const { sandbox } = context;
    const resolve = (path: string): string => resolveToolPath(sandbox, path);
    const paths = files.flatMap((file) =>
      [file.oldPath, file.newPath].filter((p): p is string => p !== undefined).map(resolve),
    );
    return withPathLocks({ sandboxId: sandbox.id, paths }, () =>
      applyFiles(files, context, resolve),
    );
  },
});

type Content = string | null; // null: no file

interface Plan {
  /** What each path held before (bytes), null when it did not exist. */
  originals: Map<string, Uint8Array | null>;
  /** What each path holds after the patch. */
  results: Map<string, Content>;
  summary: string[];
  notes: string[];
  failures: string[];
}

async function applyFiles(
  files: FilePatch[],
  context: ToolContext,
  resolve: (path: string) => string,
): Promise<ToolResult> {
  const plan: Plan = {
    originals: new Map(),
    results: new Map(),
    summary: [],
    notes: [],
    failures: [],
  };
  for (const file of files) await planFile(file, context, resolve, plan);
  if (plan.failures.length > 0) {
    return errorResult(
      [
        `The patch does not apply; nothing was changed. ${plan.failures.length} problem(s):`,
        ...plan.failures.map((failure) => `- ${failure}`),
        "Read the affected files again and send a corrected patch (all files again: nothing of this one was applied).",
      ].join("\n"),
    );
  }
  const written = await commit(plan, context);
  if (written.error !== undefined) return errorResult(written.error);
  const lines = [`Applied the patch (${plan.summary.length} file change(s)):`, ...plan.summary];
  if (plan.notes.length > 0) lines.push("Notes:", ...plan.notes.map((note) => `- ${note}`));
  return textResult(lines.join("\n"));
}

async function planFile(
  file: FilePatch,
  context: ToolContext,
  resolve: (path: string) => string,
  plan: Plan,
): Promise<void> {
  const oldPath = file.oldPath === undefined ? undefined : resolve(file.oldPath);
  const newPath = file.newPath === undefined ? undefined : resolve(file.newPath);
  const label = file.oldPath ?? file.newPath ?? "?";
  const fail = (reason: string): void => {
    plan.failures.push(`${label} (patch line ${file.patchLine}): ${reason}`);
  };
  let current: Content = "";
  try {
    if (oldPath !== undefined) {
      current = await load(oldPath, context, plan);
      if (current === null) {
        fail(
          `${oldPath} does not exist${file.kind === "delete" ? "" : "; to create it use --- /dev/null"}.`,
        );
        return;
      }
    }
    if (newPath !== undefined && newPath !== oldPath) {
      const existing = await load(newPath, context, plan);
      if (existing !== null) {
        fail(
          `${newPath} already exists; ${file.kind === "add" ? "patch it as a modification instead" : "pick a new name or delete it first"}.`,
        );
        return;
      }
    }
  } catch (error) {
    fail(
      error instanceof PatchTargetError
        ? error.message
        : describeToolError(error, { workdir: context.sandbox.workdir }),
    );
    return;
  }
  let text = current;
  if (file.hunks.length > 0) {
    const applied = applyHunks(current, file.hunks);
    if (!applied.ok) {
      for (const failure of applied.failures) {
        fail(
          `hunk ${failure.index + 1} ${failure.header} (patch line ${failure.patchLine}) does not apply: ${failure.reason}`,
        );
      }
      return;
    }
    text = applied.text;
    plan.notes.push(...applied.notes.map((note) => `${label}: ${note}`));
    if (file.kind === "delete" && text !== "") {
      fail(
        `the patch deletes ${oldPath ?? label}, but its hunks do not remove all of its content (${text.split("\n").length} line(s) would remain); the file has changed. Read it again.`,
      );
      return;
    }
  }
  const stats = countChanges(file.hunks);
  switch (file.kind) {
    case "add":
      if (newPath !== undefined) plan.results.set(newPath, text);
      plan.summary.push(`A ${file.newPath ?? ""} ${stats}`);
      break;
    case "delete":
      if (oldPath !== undefined) plan.results.set(oldPath, null);
      plan.summary.push(`D ${file.oldPath ?? ""}`);
      break;
    case "modify":
      if (oldPath !== undefined) plan.results.set(oldPath, text);
      plan.summary.push(`M ${file.oldPath ?? ""} ${stats}`);
      break;
    case "rename":
      if (oldPath !== undefined) plan.results.set(oldPath, null);
      if (newPath !== undefined) plan.results.set(newPath, text);
      plan.summary.push(
        `R ${file.oldPath ?? ""} → ${file.newPath ?? ""} ${file.hunks.length > 0 ? stats : ""}`.trimEnd(),
      );
      break;
  }
}

/** The text at `path` as the patch sees it: earlier files of this patch first, then the sandbox. */
async function load(path: string, context: ToolContext, plan: Plan): Promise<Content> {
  const planned = plan.results.get(path);
  if (planned !== undefined) return planned;
  const { sandbox, signal } = context;
  const info = await sandbox.files.stat(path, { signal });
  if (!info) {
    if (!plan.originals.has(path)) plan.originals.set(path, null);
    return null;
  }
  if (info.type === "directory") throw new PatchTargetError(`${path} is a directory`);
  if (info.size > limits.editMaxBytes) {
    throw new PatchTargetError(`${path} is too large to patch (${info.size} bytes); use exec`);
  }
  const bytes = await sandbox.files.readFile(path, { signal, maxBytes: limits.editMaxBytes });
  const text = decodeText(bytes);
  if (text === undefined)
    throw new PatchTargetError(`${path} is a binary file; patches change text only`);
  if (!plan.originals.has(path)) plan.originals.set(path, bytes);
  return text;
}

class PatchTargetError extends Error {}

function countChanges(hunks: readonly Hunk[]): string {
  let added = 0;
  let removed = 0;
  for (const hunk of hunks) {
    for (const line of hunk.lines) {
      if (line.kind === "+") added++;
      if (line.kind === "-") removed++;
    }
  }
  return `(+${added} -${removed})`;
}

/**
 * Writes the planned results: new contents first, removals last (so a rename never loses the
 * file). If any write fails, what was already done is undone from the originals.
 */
async function commit(plan: Plan, context: ToolContext): Promise<{ error?: string }> {
  const { sandbox, signal } = context;
  const encoder = new TextEncoder();
  const done: string[] = [];
  const entries = [...plan.results.entries()].sort(([, a], [, b]) =>
    a === null ? (b === null ? 0 : 1) : b === null ? -1 : 0,
  );
  try {
    for (const [path, content] of entries) {
      if (content === null) {
        if (plan.originals.get(path) != null) await sandbox.files.remove(path, { signal });
        sessionStateFor(context).forget(sandbox, path);
      } else {
        const bytes = encoder.encode(content);
        await sandbox.files.writeFile(path, bytes, { signal, createParents: true });
        await recordWritten(context, sandbox, path, bytes);
      }
      done.push(path);
    }
    return {};
  } catch (error) {
    const rollbackFailures: string[] = [];
    for (const path of done.reverse()) {
      const original = plan.originals.get(path);
      try {
        // Undo even when the run is being aborted: a half-applied patch is worse.
        if (original == null) await sandbox.files.remove(path);
        else await sandbox.files.writeFile(path, original, { createParents: true });
        sessionStateFor(context).forget(sandbox, path);
      } catch (undoError) {
        rollbackFailures.push(
          `${path}: ${describeToolError(undoError, { workdir: sandbox.workdir })}`,
        );
      }
    }
    const undone =
      rollbackFailures.length === 0
        ? done.length > 0
          ? ` The ${done.length} file(s) already written were restored; nothing is changed.`
          : " Nothing was changed."
        : ` Restoring the files already written failed for: ${rollbackFailures.join("; ")}. Check them with read.`;
    return {
      error: `Writing the patched files failed: ${describeToolError(error, { workdir: context.sandbox.workdir })}${undone}`,
    };
  }
}
