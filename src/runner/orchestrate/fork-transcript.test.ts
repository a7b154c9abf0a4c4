import { mkdtemp, readFile, rm, writeFile, mkdir } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";

import { afterEach, beforeEach, describe, expect, it } from "vitest";

import { ForkTargetExistsError } from "../../sandbox/index.js";
import { JsonlSession, sessionFilePath } from "../session/index.js";
import { assertNoTranscript, copyTranscriptToFork, forkNote } from "./fork-transcript.js";

const plan = (sessionKey: string) => ({ sessionKey, agent: { workspaceId: "0123abcd4567" } });
const parent = plan("agent:main:fix");
const fork = plan("agent:main:fix-b");

describe("a fork's transcript", () => {
  let stateDir: string;
  beforeEach(async () => {
    stateDir = await mkdtemp(path.join(tmpdir(), "cordon-fork-transcript-"));
  });
  afterEach(async () => {
    await rm(stateDir, { recursive: true, force: true });
  });

  const openSession = (of: typeof parent) =>
    JsonlSession.open({ stateDir, sessionKey: of.sessionKey, project: of.agent.workspaceId });

  it("is the parent's conversation, a torn last line dropped, then the note", async () => {
    const session = await openSession(parent);
    await session.append({ role: "user", content: [{ type: "text", text: "fix the parser" }] });
    await session.close();
    // A crash mid-write left half a line behind.
    const file = sessionFilePath(stateDir, parent.sessionKey, parent.agent.workspaceId);
    await writeFile(file, `${await readFile(file, "utf8")}{"role":"assis`);

    const at = new Date("2026-11-27T10:00:00.000Z");
    await expect(copyTranscriptToFork({ stateDir, parent, fork, now: at })).resolves.toBe(true);
    const copied = await openSession(fork);
    const texts = copied.entries.map((entry) => JSON.stringify(entry));
    await copied.close();
    expect(texts).toHaveLength(2);
    expect(texts[0]).toContain("fix the parser");
    expect(texts[1]).toContain(JSON.stringify(forkNote(parent.sessionKey, at)).slice(1, -1));
    // The parent's own file is untouched (still torn: only opening it repairs it).
    expect(await readFile(file, "utf8")).toMatch(/\{"role":"assis$/);
  });

  it("is none when the parent has none", async () => {
    await expect(copyTranscriptToFork({ stateDir, parent, fork })).resolves.toBe(false);
    await expect(assertNoTranscript(stateDir, fork)).resolves.toBeUndefined();
  });

  it("refuses a fork whose session has a transcript already", async () => {
    const existing = sessionFilePath(stateDir, fork.sessionKey, fork.agent.workspaceId);
    await mkdir(path.dirname(existing), { recursive: true });
    await writeFile(existing, "");
    await expect(assertNoTranscript(stateDir, fork)).rejects.toBeInstanceOf(ForkTargetExistsError);
  });

  it("says which session it forked, and that the two go on separately", () => {
    const note = forkNote("agent:main:fix", new Date("2026-11-27T10:00:00.000Z"));
    expect(note).toMatch(/fork of session agent:main:fix, made at 2026-11-27T10:00:00\.000Z/);
    expect(note).toMatch(/does not change agent:main:fix/);
  });
});
