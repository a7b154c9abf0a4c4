import { appendFile, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { AssistantMessage, Message } from "../model/index.js";
import { JsonlSession, SessionCorruptError } from "./jsonl-session.js";
import { listSessions } from "./list-sessions.js";
import { sessionFileName, sessionFilePath, sessionKeyOf } from "./session-name.js";

let stateDir: string;
beforeEach(async () => {
  stateDir = await mkdtemp(path.join(tmpdir(), "cordon-session-"));
});
afterEach(async () => {
  await rm(stateDir, { recursive: true, force: true });
});

const user = (text: string): Message => ({ role: "user", content: [{ type: "text", text }] });
const toolCall = (id: string): AssistantMessage => ({
  role: "assistant",
  content: [
    { type: "thinking", thinking: "hmm", signature: "sig==" },
    { type: "tool_use", id, name: "exec", input: { command: "make" } },
  ],
});

async function lines(file: string): Promise<unknown[]> {
  const text = await readFile(file, "utf8");
  return text
    .split("\n")
    .filter((l) => l !== "")
    .map((l) => JSON.parse(l) as unknown);
}

describe("JsonlSession", () => {
  it("appends one line per message and reloads the same transcript", async () => {
    const session = await JsonlSession.open({ stateDir, sessionKey: "agent:main:main" });
    await session.append(user("hello"));
    await session.append(
      { role: "assistant", content: [{ type: "text", text: "hi" }] },
      {
        model: "m1",
        stopReason: "end_turn",
        usage: { inputTokens: 1, outputTokens: 2, cacheReadTokens: 0, cacheWriteTokens: 0 },
      },
    );
    await session.close();

    const file = sessionFilePath(stateDir, "agent:main:main");
    expect(path.basename(file)).toBe("agent~3Amain~3Amain.jsonl");
    const written = await lines(file);
    expect(written).toHaveLength(2);
    expect(written[1]).toMatchObject({
      v: 1,
      kind: "message",
      role: "assistant",
      model: "m1",
      stopReason: "end_turn",
      usage: { outputTokens: 2 },
    });
    expect(typeof (written[1] as { ts: unknown }).ts).toBe("string");

    const again = await JsonlSession.open({ stateDir, sessionKey: "agent:main:main" });
    expect(again.messages()).toEqual([
      user("hello"),
      { role: "assistant", content: [{ type: "text", text: "hi" }] },
    ]);
    await again.close();
  });

  it("drops a torn last line (crash mid-write) and appends cleanly after it", async () => {
    const session = await JsonlSession.open({ stateDir, sessionKey: "s" });
    await session.append(user("one"));
    await session.close();
    const file = sessionFilePath(stateDir, "s");
    await appendFile(file, '{"v":1,"ts":"2025-01-01T00:00:00Z","role":"assistant","content":[{"ty');

    const warnings: string[] = [];
    const logger = fakeLogger(warnings);
    const reopened = await JsonlSession.open({ stateDir, sessionKey: "s", logger });
    expect(reopened.messages()).toEqual([user("one")]);
    expect(warnings.join("\n")).toMatch(/incomplete/);
    await reopened.append(user("two"));
    await reopened.close();

    const third = await JsonlSession.open({ stateDir, sessionKey: "s" });
    expect(third.messages()).toEqual([user("one"), user("two")]);
    await third.close();
    expect(await lines(file)).toHaveLength(2);
  });

  it("drops a complete-looking last line that lacks its newline", async () => {
    const session = await JsonlSession.open({ stateDir, sessionKey: "s" });
    await session.append(user("one"));
    await session.close();
    const file = sessionFilePath(stateDir, "s");
    await appendFile(file, JSON.stringify({ v: 1, ts: "t", role: "user", content: [] }));
    const reopened = await JsonlSession.open({ stateDir, sessionKey: "s" });
    expect(reopened.lineCount).toBe(1);
    await reopened.close();
  });

  it("refuses a file corrupted in the middle, naming the line and the fix", async () => {
    const file = sessionFilePath(stateDir, "s");
    await JsonlSession.open({ stateDir, sessionKey: "s" }).then((s) => s.close());
    await writeFile(
      file,
      `${JSON.stringify({ v: 1, ts: "t", role: "user", content: [] })}\nGARBAGE\n${JSON.stringify({ v: 1, ts: "t", role: "user", content: [] })}\n`,
    );
    const error: unknown = await JsonlSession.open({ stateDir, sessionKey: "s" }).catch(
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(SessionCorruptError);
    expect((error as SessionCorruptError).message).toMatch(/Line 2/);
    expect((error as SessionCorruptError).fix).toMatch(/--session/);
  });

  it("answers a tool_use left without a result (crash mid-tool), durably", async () => {
    const session = await JsonlSession.open({ stateDir, sessionKey: "s" });
    await session.append(user("build it"));
    await session.append(toolCall("toolu_1"), { stopReason: "tool_use" });
    expect(session.openToolUses().map((u) => u.id)).toEqual(["toolu_1"]);
    await session.close();

    const reopened = await JsonlSession.open({ stateDir, sessionKey: "s" });
    const messages = reopened.messages();
    expect(messages).toHaveLength(3);
    expect(messages[1]).toEqual(toolCall("toolu_1"));
    expect(messages[2]).toMatchObject({
      role: "user",
      content: [{ type: "tool_result", toolUseId: "toolu_1", isError: true }],
    });
    expect(reopened.openToolUses()).toEqual([]);
    await reopened.close();
    // The repair is on disk, so it happens once.
    expect(await lines(sessionFilePath(stateDir, "s"))).toHaveLength(3);
  });

  it("answers only the calls without a result when some results were written", async () => {
    const session = await JsonlSession.open({ stateDir, sessionKey: "s" });
    await session.append(user("go"));
    await session.append({
      role: "assistant",
      content: [
        { type: "tool_use", id: "a", name: "exec", input: {} },
        { type: "tool_use", id: "b", name: "exec", input: {} },
      ],
    });
    await session.append({
      role: "user",
      content: [
        {
          type: "tool_result",
          toolUseId: "a",
          content: [{ type: "text", text: "ok" }],
          isError: false,
        },
      ],
    });
    expect(session.openToolUses().map((u) => u.id)).toEqual(["b"]);
    expect(await session.answerOpenToolUses("aborted")).toBe(1);
    expect(session.openToolUses()).toEqual([]);
    const last = session.messages().at(-1);
    expect(last?.content[0]).toMatchObject({ toolUseId: "b", isError: true });
    await session.close();
  });

  it("applies compaction and reset lines", async () => {
    const session = await JsonlSession.open({ stateDir, sessionKey: "s" });
    await session.append(user("old 1"));
    await session.append({ role: "assistant", content: [{ type: "text", text: "old 2" }] });
    await session.append(user("recent 3"));
    await session.appendCompaction("Summary of old 1 and 2", 2);
    await session.append({ role: "assistant", content: [{ type: "text", text: "new 5" }] });
    expect(session.messages()).toEqual([
      user("Summary of old 1 and 2"),
      user("recent 3"),
      { role: "assistant", content: [{ type: "text", text: "new 5" }] },
    ]);
    await session.appendReset("The conversation was reset.");
    await session.append(user("again"));
    await session.close();
    const reopened = await JsonlSession.open({ stateDir, sessionKey: "s" });
    expect(reopened.messages()).toEqual([user("The conversation was reset."), user("again")]);
    await reopened.close();
  });

  it("keeps thinking signatures byte for byte", async () => {
    const session = await JsonlSession.open({ stateDir, sessionKey: "s" });
    const message: AssistantMessage = {
      role: "assistant",
      content: [
        { type: "thinking", thinking: 'ü\n\t "quoted"', signature: "AbC+/==\u2028" },
        { type: "redacted_thinking", data: "opaque" },
        { type: "text", text: "x" },
      ],
    };
    await session.append(user("q"));
    await session.append(message);
    await session.close();
    const reopened = await JsonlSession.open({ stateDir, sessionKey: "s" });
    expect(reopened.messages()[1]).toEqual(message);
    await reopened.close();
  });

  it("serialises concurrent appends into whole lines", async () => {
    const session = await JsonlSession.open({ stateDir, sessionKey: "s" });
    await Promise.all(Array.from({ length: 20 }, (_, i) => session.append(user(`m${i}`))));
    await session.close();
    expect(await lines(sessionFilePath(stateDir, "s"))).toHaveLength(20);
  });
});

describe("session names and listing", () => {
  it("encodes keys reversibly into safe file names", () => {
    for (const key of ["agent:main:main", "../../etc/passwd", "a b/ü", "x.y"]) {
      const name = sessionFileName(key);
      expect(name).toMatch(/^[A-Za-z0-9_~-]+\.jsonl$/);
      expect(sessionKeyOf(name)).toBe(key);
    }
    expect(sessionKeyOf("notes.txt")).toBeUndefined();
    expect(() => sessionFileName("")).toThrow(/session key/);
  });

  it("lists sessions, newest first, ignoring other files", async () => {
    expect(await listSessions({ stateDir })).toEqual([]);
    for (const key of ["agent:a:one", "agent:a:two"]) {
      const s = await JsonlSession.open({ stateDir, sessionKey: key });
      await s.append(user(key));
      await s.close();
    }
    await writeFile(path.join(stateDir, "sessions", "README.txt"), "x");
    const sessions = await listSessions({ stateDir });
    expect(sessions.map((s) => s.sessionKey).sort()).toEqual(["agent:a:one", "agent:a:two"]);
    expect(sessions[0]?.sizeBytes).toBeGreaterThan(0);
  });
});

function fakeLogger(warnings: string[]): never {
  const logger = {
    child: () => logger,
    warn: (_obj: unknown, message: string) => warnings.push(message),
    debug: () => undefined,
    info: () => undefined,
    error: () => undefined,
  };
  return logger as never;
}
