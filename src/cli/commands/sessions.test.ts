import { mkdtemp } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";

import { describe, expect, it } from "vitest";

import { JsonlSession } from "../../runner/index.js";
import { runCli } from "../run-cli.js";

async function cordon(args: string[], home: string) {
  let out = "";
  let err = "";
  const code = await runCli(
    ["node", "cordon", ...args],
    { CORDON_HOME: home, CORDON_LOG_LEVEL: "silent" },
    {
      stdout: (t) => (out += t),
      stderr: (t) => (err += t),
    },
  );
  return { code, out, err };
}

describe("cordon sessions", () => {
  it("lists and shows a session written by a run", async () => {
    const home = await mkdtemp(path.join(tmpdir(), "cordon-sessions-"));
    const session = await JsonlSession.open({ stateDir: home, sessionKey: "agent:main:fix" });
    await session.append({ role: "user", content: [{ type: "text", text: "fix the test" }] });
    await session.append(
      {
        role: "assistant",
        content: [{ type: "tool_use", id: "t1", name: "exec", input: { command: "ls" } }],
      },
      { model: "m", stopReason: "tool_use" },
    );
    await session.close();

    const list = await cordon(["sessions", "list", "--json"], home);
    expect(list.code).toBe(0);
    expect((JSON.parse(list.out) as { sessionKey: string }[]).map((s) => s.sessionKey)).toEqual([
      "agent:main:fix",
    ]);

    const show = await cordon(["sessions", "show", "agent:main:fix"], home);
    expect(show.code).toBe(0);
    expect(show.out).toContain("fix the test");
    expect(show.out).toContain('[tool_use exec] {"command":"ls"}');
  });

  it("names the fix for an unknown session (exit 2)", async () => {
    const home = await mkdtemp(path.join(tmpdir(), "cordon-sessions-"));
    const show = await cordon(["sessions", "show", "agent:main:nope"], home);
    expect(show.code).toBe(2);
    expect(show.err).toMatch(/cordon sessions list/);
  });
});
