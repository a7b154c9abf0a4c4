import { afterAll, beforeAll, describe, expect, it } from "vitest";

import {
  createToolRunner,
  startDockerToolSandbox,
  type DockerToolSandbox,
  type ToolRunner,
} from "../support/tool-runner.js";

/**
 * exec and process through the toolset, against one real hardened container (uid 1000, read-only
 * root, no network): what the model sends is validated, run in the container, and rendered.
 */
describe("exec and process tools over DockerSandbox", () => {
  let box: DockerToolSandbox;
  let tools: ToolRunner;

  beforeAll(async () => {
    box = await startDockerToolSandbox({ name: "tools-exec" });
    tools = createToolRunner({ sandbox: box.sandbox });
  });

  afterAll(async () => {
    await box?.dispose();
  });

  /** Command lines of the container's processes that contain `needle` (test-side ps). */
  async function processesMatching(needle: string): Promise<string[]> {
    const ps = await box.sandbox.exec("ps -eo args=");
    return ps.stdout
      .split("\n")
      .filter((line) => line.includes(needle) && !line.includes("ps -eo"));
  }

  /** Polls a background process until its accumulated output contains `text` (bounded tries). */
  async function pollUntil(id: string, text: string): Promise<string> {
    let seen = "";
    for (let attempt = 0; attempt < 100; attempt++) {
      seen += await tools.ok("process", { action: "poll", id });
      if (seen.includes(text)) return seen;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    throw new Error(`process ${id} never printed ${JSON.stringify(text)}; saw:\n${seen}`);
  }

  describe("exec", () => {
    it("returns combined output and the exit code; a non-zero exit is an error result", async () => {
      const ok = await tools.ok("exec", { command: "echo out; pwd; id -u; echo err >&2" });
      // stdout and stderr are two pipes: they interleave in arrival order, not in write order.
      expect(ok.split("\n").sort()).toEqual(
        expect.arrayContaining(["/workspace", "1000", "err", "out"]),
      );
      expect(ok).toMatch(/\n\[exit code 0, \d+\.\ds\]$/);

      const failed = await tools.fail("exec", { command: "echo partial; exit 3" });
      expect(failed).toMatch(/^partial\n\[exit code 3, /);

      expect(await tools.ok("exec", { command: "true" })).toMatch(/^\(no output\)\n\[exit code 0/);
      const missing = await tools.fail("exec", { command: "no-such-command-xyz" });
      expect(missing).toContain("no-such-command-xyz: command not found");
      expect(missing).toContain("[exit code 127");
    });

    it("refuses invalid input before running anything, saying what to fix", async () => {
      const empty = await tools.fail("exec", { command: "" });
      expect(empty).toContain('Invalid input for tool "exec"; nothing was run');
      expect(empty).toContain("- command:");
      const tooLong = await tools.fail("exec", { command: "touch ran", timeoutSec: 99_999 });
      expect(tooLong).toContain("- timeoutSec:");
      const extra = await tools.fail("exec", { command: "touch ran", shell: "zsh" });
      expect(extra).toContain("shell");
      const ran = await box.sandbox.files.stat("ran");
      expect(ran).toBeUndefined();
    });

    it("keeps head and tail of huge output and names the full log, which read can page", async () => {
      const text = await tools.ok("exec", { command: "seq 1 200000" });
      const lines = text.split("\n");
      expect(lines.slice(0, 3)).toEqual(["1", "2", "3"]);
      expect(text).toMatch(/\n200000\n\[exit code 0, /);
      expect(text).not.toMatch(/\n100000\n/);
      expect(text.length).toBeLessThan(34_000);
      const logPath = /Full output: (\S+) \(read it/.exec(text)?.[1];
      expect(logPath).toMatch(/^\/tmp\/\.cordon\/logs\/.+\.log$/);

      const middle = await tools.ok("read", { path: logPath, offset: 100_000, limit: 2 });
      expect(middle.split("\n").slice(0, 2)).toEqual(["100000\t100000", "100001\t100001"]);
      expect(middle).toContain(
        "[Showing lines 100000-100001 of 200000. Continue with offset=100002.]",
      );
      const grep = await tools.ok("grep", { pattern: "^123456$", path: logPath });
      expect(grep).toBe(`${logPath}:123456:123456`);
    });

    it("keeps head and tail of a single 3 MB line", async () => {
      const text = await tools.ok("exec", {
        command: "head -c 3000000 /dev/zero | tr '\\0' a; echo tail-marker",
      });
      expect(text.startsWith("aaaa")).toBe(true);
      expect(text).toMatch(/aaaatail-marker\n\[exit code 0, /);
      expect(text.length).toBeLessThan(34_000);
      expect(text).toMatch(/Full output: \/tmp\/\.cordon\/logs\//);
    });

    it("never loses the last stderr line of a command that floods stdout", async () => {
      // The error line is written last, but on its own pipe it may overtake the stdout flood
      // and land in the dropped middle; the tool then shows the end of stderr separately.
      for (let attempt = 0; attempt < 3; attempt++) {
        const text = await tools.fail("exec", {
          command: "seq 1 400000; echo 'error: the build failed' >&2; exit 2",
        });
        expect(text).toContain("error: the build failed");
        expect(text).toMatch(/\n400000\n/);
        expect(text.length).toBeLessThan(36_000);
      }
    });

    it("kills the command and everything it started, even escapees, when the timeout hits", async () => {
      const result = await tools.fail("exec", {
        command:
          "sleep 3001 & setsid sleep 3002 & (trap '' HUP; nohup sleep 3003 >/dev/null 2>&1 &); echo started; sleep 3004",
        timeoutSec: 1,
      });
      expect(result).toMatch(
        /^started\n\[timed out after 1s and was killed \(with everything it started\)/,
      );
      expect(result).toContain("[Raise timeoutSec (max 3600) or run it with background: true.]");
      expect(await processesMatching("sleep 300")).toEqual([]);
    });

    it("bounds an endless output bomb: killed at the timeout, head and tail kept, log capped", async () => {
      const text = await tools.fail("exec", { command: "yes bomb", timeoutSec: 2 });
      expect(text.startsWith("bomb\nbomb\n")).toBe(true);
      expect(text).toContain("[timed out after 2s and was killed");
      expect(text.length).toBeLessThan(34_000);
      const logPath = /Full output: (\S+) \(read it/.exec(text)?.[1] ?? "";
      const logBytes = Number(
        await box.sandbox.exec(`stat -c %s ${logPath}`).then((r) => r.stdout),
      );
      expect(logBytes).toBeGreaterThan(32_000);
      expect(logBytes).toBeLessThanOrEqual(64 * 1024 * 1024 + 4096);
      await box.sandbox.files.remove(logPath);
    });

    it("aborting the call kills the command's whole tree and says so", async () => {
      const controller = new AbortController();
      const call = tools.call(
        "exec",
        { command: "(setsid sleep 3091 &); sleep 3092" },
        { signal: controller.signal },
      );
      for (let attempt = 0; attempt < 100; attempt++) {
        if ((await processesMatching("sleep 3092")).length > 0) break;
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      controller.abort();
      const result = await call;
      expect(result).toEqual({
        content: [{ type: "text", text: "The call was aborted before it finished." }],
        isError: true,
      });
      expect(await processesMatching("sleep 309")).toEqual([]);
    });

    it("passes env for this call only, exactly, without shell expansion of the values", async () => {
      const value = `a b 'c' "d" $HOME $(touch /tmp/pwned) \\n`;
      const text = await tools.ok("exec", {
        command: 'printf "[%s]" "$FOO"; printf "[%s]" "${BAR-unset}"',
        env: { FOO: value },
      });
      expect(text).toContain(`[${value}][unset]`);
      expect(await tools.ok("exec", { command: 'printf "[%s]" "${FOO-unset}"' })).toContain(
        "[unset]",
      );
      expect(await box.sandbox.files.stat("/tmp/pwned")).toBeUndefined();
    });

    it("runs in a workdir inside the sandbox and refuses a missing, file or kernel-fs one", async () => {
      await box.sandbox.files.mkdir("sub dir/-x");
      expect(await tools.ok("exec", { command: "pwd", workdir: "sub dir/-x" })).toMatch(
        /^\/workspace\/sub dir\/-x\n/,
      );
      // The container is the whole sandbox: ../.. is the container's root, not the host's.
      expect(
        await tools.ok("exec", { command: "pwd; cat hostname", workdir: "../../etc" }),
      ).toMatch(/^\/etc\n[0-9a-f]{12}\n/);

      const missing = await tools.fail("exec", { command: "touch ran", workdir: "nope" });
      expect(missing).toContain("/workspace/nope");
      expect(missing).toMatch(/does not exist/);
      await box.sandbox.files.writeFile("a-file", "x");
      expect(await tools.fail("exec", { command: "touch ran", workdir: "a-file" })).toMatch(
        /not a directory/,
      );
      const proc = await tools.fail("exec", { command: "touch ran", workdir: "/proc/self/cwd" });
      expect(proc).toMatch(/outside the sandbox/);
      expect(await box.sandbox.files.stat("ran")).toBeUndefined();
    });
  });

  describe("background processes", () => {
    it("starts one and drives it with poll, write, log, list and kill", async () => {
      const started = await tools.ok("exec", {
        command: 'echo ready; while read -r line; do echo "got:$line"; done',
        background: true,
      });
      const id = /Started background process (\S+):/.exec(started)?.[1];
      expect(id, started).toBeDefined();
      if (id === undefined) return;
      expect(await pollUntil(id, "ready")).toContain(`[${id}: running`);

      expect(await tools.ok("process", { action: "write", id, data: "hello world\n" })).toBe(
        `Wrote 12 bytes to the stdin of ${id}.`,
      );
      await pollUntil(id, "got:hello world");
      const log = await tools.ok("process", { action: "log", id });
      expect(log).toMatch(/^ready\ngot:hello world\n\[/);

      expect(await tools.ok("process", { action: "list" })).toContain(`${id}: running`);
      expect(await tools.ok("process", { action: "kill", id })).toMatch(
        new RegExp(`^Killed ${id}\\. \\[${id}: exited`),
      );
      expect(await tools.ok("process", { action: "list" })).toMatch(new RegExp(`${id}: exited`));
      expect(await processesMatching("got:$line")).toEqual([]);
    });

    it("reports a finished process's exit code and its output", async () => {
      const started = await tools.ok("exec", {
        command: "echo bye; exit 3",
        background: true,
        workdir: "/tmp",
        env: { X: "1" },
      });
      const id = /Started background process (\S+):/.exec(started)?.[1] ?? "";
      let text = "";
      for (let attempt = 0; attempt < 100 && !text.includes("exited"); attempt++) {
        text = await tools.ok("process", { action: "log", id });
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      expect(text).toMatch(new RegExp(`^bye\\n\\[${id}: exited with code 3,`));
    });

    it("answers an unknown id with the known ones, and a missing id or data as invalid input", async () => {
      const unknown = await tools.fail("process", { action: "poll", id: "nope" });
      expect(unknown).toMatch(/^No background process with id "nope"\. Known ids: /);
      expect(await tools.fail("process", { action: "kill" })).toContain(
        '- id: action "kill" needs id',
      );
      expect(await tools.fail("process", { action: "write", id: "x" })).toContain(
        '- data: action "write" needs data',
      );
    });

    it("bounds the log of a process that floods its output", async () => {
      const started = await tools.ok("exec", {
        command: "seq 1 300000; echo flood-done",
        background: true,
      });
      const id = /Started background process (\S+):/.exec(started)?.[1] ?? "";
      let log = "";
      for (let attempt = 0; attempt < 100 && !log.includes("exited"); attempt++) {
        await new Promise((resolve) => setTimeout(resolve, 100));
        log = await tools.ok("process", { action: "log", id });
      }
      expect(log).toContain("exited with code 0");
      expect(log.length).toBeLessThan(34_000);
      expect(log).toContain("flood-done");
    });
  });
});
