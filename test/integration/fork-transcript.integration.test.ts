/**
 * A fork carries its parent's conversation (`cordon fork`, docs/checkpoints.md "Forks"): the next
 * run in the fork sends the model the parent's history, a note that it is a fork, then its own
 * prompt — and the parent's next run sees nothing of the fork's. The real SDK talks to a local
 * Messages API server, which records what each run sent.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";

import { afterAll, beforeAll, describe, expect, it } from "vitest";

import { demoRepo } from "../support/demo-repo.js";
import { removeContainersOfHome, requireSandboxImage } from "../support/docker.js";
import { startMessagesApiServer, type MessagesApiServer } from "../support/messages-api-server.js";
import { runCordon } from "../support/run-cli.js";
import { removeStateDirectory } from "../support/state-directory.js";

interface ForkJson {
  forks: { name: string; transcript: boolean }[];
}

describe("a fork's conversation", () => {
  let home: string;
  let repo: string;
  let server: MessagesApiServer;
  const parent = `talk-${process.pid}`;

  const env = () => ({
    CORDON_HOME: home,
    CORDON_CONFIG: "",
    ANTHROPIC_API_KEY: "test-key",
    ANTHROPIC_BASE_URL: server.url,
  });
  /** `cordon COMMAND --workspace <repo> …`. */
  const cordon = (command: string, ...args: string[]) =>
    runCordon([command, "--workspace", repo, ...args], env());

  /** One `cordon run` in `session` answered "done"; the messages it sent the model, as text. */
  async function runIn(session: string, prompt: string): Promise<string> {
    server.enqueue({ kind: "message", content: [{ type: "text", text: "done" }] });
    const before = server.requests.length;
    const run = await cordon("run", "--session", session, prompt);
    expect(run.exitCode, run.stderr).toBe(0);
    const body = server.requests[before]?.body as { messages?: unknown } | undefined;
    return JSON.stringify(body?.messages ?? []);
  }

  beforeAll(async () => {
    await requireSandboxImage();
    home = await mkdtemp(path.join(tmpdir(), "cordon-fork-talk-home-"));
    repo = await demoRepo();
    server = await startMessagesApiServer();
    // The parent's conversation: a tool call that writes a file, then an answer.
    server.enqueue(
      {
        kind: "message",
        content: [
          {
            type: "tool_use",
            id: "toolu_parent_1",
            name: "exec",
            input: { command: "echo from-the-parent > note.txt" },
          },
        ],
      },
      { kind: "message", content: [{ type: "text", text: "I wrote note.txt" }] },
    );
    const first = await cordon("run", "--session", parent, "write a note for later");
    expect(first.exitCode, first.stderr).toBe(0);
  }, 300_000);

  afterAll(async () => {
    await server?.close();
    await removeContainersOfHome(home);
    await removeStateDirectory(home);
    await rm(path.dirname(repo), { recursive: true, force: true });
  });

  it("the fork's next run sends the parent's history, the fork note, then its prompt; the parent sees none of it", async () => {
    const forked = await cordon("fork", "--session", parent, "--as", `${parent}-b`, "--json");
    expect(forked.exitCode, forked.stderr).toBe(0);
    expect((JSON.parse(forked.stdout) as ForkJson).forks).toEqual([
      expect.objectContaining({ name: `${parent}-b`, transcript: true }),
    ]);

    const sent = await runIn(`${parent}-b`, "what did you write?");
    const order = [
      "write a note for later",
      "toolu_parent_1",
      "I wrote note.txt",
      `[cordon] This session is a fork of session`,
      "what did you write?",
    ].map((text) => sent.indexOf(text));
    expect(
      order.every((at) => at >= 0),
      sent,
    ).toBe(true);
    expect([...order].sort((a, b) => a - b)).toEqual(order);
    // Its files came along too (the copy's state, not only the words).
    const read = await cordon("exec", "--session", `${parent}-b`, "--", "cat", "note.txt");
    expect(read.stdout).toBe("from-the-parent\n");

    const parentSent = await runIn(parent, "anything new?");
    expect(parentSent).toContain("write a note for later");
    expect(parentSent).not.toContain("what did you write?");
    expect(parentSent).not.toContain("This session is a fork");
  });

  it("--no-transcript starts the fork with an empty conversation", async () => {
    const forked = await cordon(
      "fork",
      "--session",
      parent,
      "--as",
      `${parent}-fresh`,
      "--no-transcript",
      "--json",
    );
    expect(forked.exitCode, forked.stderr).toBe(0);
    expect((JSON.parse(forked.stdout) as ForkJson).forks[0]?.transcript).toBe(false);
    const sent = await runIn(`${parent}-fresh`, "start over");
    expect(sent).toContain("start over");
    expect(sent).not.toContain("write a note for later");
  });

  it("refuses a fork onto a name whose conversation exists (its sandbox removed), touching neither", async () => {
    const name = `${parent}-b`;
    const removed = await runCordon(["sandbox", "rm", name, "--discard-changes"], env());
    expect(removed.exitCode, removed.stderr).toBe(0);
    const again = await cordon("fork", "--session", parent, "--as", name);
    expect(again.exitCode).toBe(2);
    expect(again.stderr).toMatch(/has a transcript already/);
    // Its conversation is as it was: the next run there still sends its own prompt and history.
    const sent = await runIn(name, "still here?");
    expect(sent).toContain("what did you write?");
    expect(sent.match(/This session is a fork/g)).toHaveLength(1);
  });
});
