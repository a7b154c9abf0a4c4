import { describe, expect, it } from "vitest";

import { ConfigError } from "../common/index.js";
import { formatError, runCli } from "./run-cli.js";

async function run(
  args: string[],
  env: NodeJS.ProcessEnv = {},
): Promise<{ code: number; out: string; err: string }> {
  let out = "";
  let err = "";
  const code = await runCli(
    ["node", "cordon", ...args],
    { CORDON_LOG_LEVEL: "silent", ...env },
    {
      stdout: (t) => (out += t),
      stderr: (t) => (err += t),
    },
  );
  return { code, out, err };
}

describe("the CLI boundary", () => {
  it("exits 2 on an unknown command and points at --help", async () => {
    const result = await run(["frobnicate"]);
    expect(result.code).toBe(2);
    expect(result.err).toMatch(/unknown command/);
    expect(result.err).toMatch(/cordon --help/);
  });

  it("prints help and version on stdout with exit 0", async () => {
    const help = await run(["--help"]);
    expect(help.code).toBe(0);
    expect(help.out).toMatch(/doctor/);
    const version = await run(["--version"]);
    expect(version.code).toBe(0);
    expect(version.out).toMatch(/^\d+\.\d+\.\d+/);
    const command = await run(["version"]);
    expect(command).toEqual({ code: 0, out: `cordon ${version.out}`, err: "" });
    const json = JSON.parse((await run(["version", "--json"])).out) as unknown;
    expect(json).toEqual({ version: version.out.trim(), node: process.versions.node });
  });

  it("refuses a --workspace that is not a directory as a usage error (exit 2)", async () => {
    const missing = await run(["exec", "--workspace", "/nonexistent/project", "--", "true"]);
    expect(missing.code).toBe(2);
    expect(missing.err).toMatch(/--workspace <dir>.* \/nonexistent\/project does not exist/);
    const file = await run(["diff", "--workspace", "/etc/hostname"]);
    expect(file.code).toBe(2);
    expect(file.err).toMatch(/\/etc\/hostname is not a directory/);
    // Loading the exec and diff commands' modules is slow on a loaded machine.
  }, 60_000);

  it("prints every tool's input fields from its schema in `help tools`", async () => {
    const topic = await run(["help", "tools"]);
    expect(topic.code).toBe(0);
    expect(topic.out).toMatch(/^edit — Replace exact text in a file/m);
    expect(topic.out).toMatch(/^ {4}old_text +string +Exact text to replace/m);
    expect(topic.out).toMatch(/^ {4}replace_all\? +boolean/m);
    expect(topic.out).toMatch(/^ {4}action +"list" \| "poll" \| "log" \| "write" \| "kill"/m);
  });

  it("colours an error's prefix and fix where colour is on, and never under NO_COLOR", async () => {
    const bad = { CORDON_BASE_IMAGE: "Debian Bookworm" };
    const forced = await run(["sessions", "list"], { ...bad, FORCE_COLOR: "1" });
    expect(forced.code).toBe(2);
    expect(
      forced.err.startsWith("\u001b[31m\u001b[1mcordon:\u001b[22m\u001b[39m CORDON_BASE_IMAGE"),
    ).toBe(true);
    expect(forced.err).toContain("\u001b[32mfix:\u001b[39m set CORDON_BASE_IMAGE");
    const off = await run(["sessions", "list"], { ...bad, FORCE_COLOR: "1", NO_COLOR: "1" });
    expect(off.err).toMatch(/^cordon: CORDON_BASE_IMAGE/);
    // A captured stream is not a terminal: plain, as into a pipe.
    expect((await run(["sessions", "list"], bad)).err).not.toContain("\u001b[");
  });

  it("lists the exit codes in --help and in `help exit-codes`", async () => {
    const help = await run(["--help"]);
    expect(help.out).toMatch(
      /Exit codes:\n[\s\S]*\b8 +fix-tests: the patch did not pass verification/,
    );
    expect(help.out).toMatch(/143 +stopped by SIGTERM/);
    const topic = await run(["help", "exit-codes"]);
    expect(topic.code).toBe(0);
    expect(topic.out).toMatch(/^ +0 +success/);
    expect(topic.out).toMatch(/141 +the reader of stdout went away/);
  });

  it("refuses a bad environment value before any command runs: exit 2, one line and the fix", async () => {
    const result = await run(["sessions", "list"], { CORDON_BASE_IMAGE: "Debian Bookworm" });
    expect(result).toEqual({
      code: 2,
      out: "",
      err:
        'cordon: CORDON_BASE_IMAGE="Debian Bookworm" is not valid: expected a Docker image reference such as debian:bookworm-slim or ghcr.io/org/image:tag\n' +
        "  fix: set CORDON_BASE_IMAGE to a Docker image reference such as debian:bookworm-slim or ghcr.io/org/image:tag, or unset it\n",
    });
    // Even --version: a shell profile with a broken value is found at once, not mid-run.
    expect((await run(["--version"], { ANTHROPIC_BASE_URL: "api.example.com" })).code).toBe(2);
  });

  it("formats cordon errors as one line plus the fix, without a stack", () => {
    const text = formatError(new ConfigError("bad key", { fix: "remove it" }), false);
    expect(text).toBe("cordon: bad key\n  fix: remove it\n");
  });

  it("names the path and the remedy for a state directory it cannot write", () => {
    // What Node throws for mkdir under a directory the user cannot write.
    const denied = Object.assign(new Error("EACCES: permission denied, mkdir '/srv/cordon'"), {
      code: "EACCES",
      path: "/srv/cordon",
    });
    const text = formatError(denied, false);
    expect(text).toContain("cordon: EACCES: permission denied, mkdir '/srv/cordon'\n");
    expect(text).toMatch(
      / {2}fix: make \/srv\/cordon writable for the user running cordon.*CORDON_HOME/,
    );
    const full = Object.assign(new Error("ENOSPC"), { code: "ENOSPC", path: "/srv/cordon/x" });
    expect(formatError(full, false)).toMatch(/fix: free disk space where \/srv\/cordon\/x is/);
    expect(
      formatError(Object.assign(new Error("EIO"), { code: "EIO", path: "/x" }), false),
    ).not.toMatch(/fix:/);
  });

  it("formats unexpected errors with a hint to get the stack", () => {
    expect(formatError(new Error("boom"), false)).toMatch(/CORDON_DEBUG=1/);
    expect(formatError(new Error("boom"), true)).toMatch(/at /);
  });
});
