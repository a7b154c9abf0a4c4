import { mkdtemp, realpath } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";

import { describe, expect, it } from "vitest";

import { workspaceIdOf } from "../../policy/index.js";
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
  it("lists and shows a project's sessions; another project with the same key sees none of them", async () => {
    const home = await mkdtemp(path.join(tmpdir(), "cordon-sessions-"));
    const projectA = await mkdtemp(path.join(tmpdir(), "cordon-sessions-a-"));
    const projectB = await mkdtemp(path.join(tmpdir(), "cordon-sessions-b-"));
    const session = await JsonlSession.open({
      stateDir: home,
      sessionKey: "agent:main:fix",
      project: workspaceIdOf(await realpath(projectA)),
    });
    await session.append({ role: "user", content: [{ type: "text", text: "fix the test" }] });
    await session.append(
      {
        role: "assistant",
        content: [{ type: "tool_use", id: "t1", name: "exec", input: { command: "ls" } }],
      },
      { model: "m", stopReason: "tool_use" },
    );
    await session.close();
    const keysOf = (out: string) =>
      (JSON.parse(out) as { sessionKey: string }[]).map((s) => s.sessionKey);

    const list = await cordon(["sessions", "list", "--json", "--workspace", projectA], home);
    expect(list.code).toBe(0);
    expect(keysOf(list.out)).toEqual(["agent:main:fix"]);
    const show = await cordon(
      ["sessions", "show", "agent:main:fix", "--workspace", projectA],
      home,
    );
    expect(show.code).toBe(0);
    expect(show.out).toContain("fix the test");
    expect(show.out).toContain('[tool_use exec] {"command":"ls"}');

    const other = await cordon(["sessions", "list", "--json", "--workspace", projectB], home);
    expect(keysOf(other.out)).toEqual([]);
    const leak = await cordon(
      ["sessions", "show", "agent:main:fix", "--workspace", projectB],
      home,
    );
    expect(leak.code).toBe(2);
    expect(leak.out).toBe("");
    const all = await cordon(["sessions", "list", "--all", "--json"], home);
    expect(keysOf(all.out)).toEqual(["agent:main:fix"]);
  });

  it("names the fix for an unknown session (exit 2)", async () => {
    const home = await mkdtemp(path.join(tmpdir(), "cordon-sessions-"));
    const show = await cordon(["sessions", "show", "agent:main:nope", "--workspace", home], home);
    expect(show.code).toBe(2);
    expect(show.err).toMatch(/cordon sessions list/);
  });
});
