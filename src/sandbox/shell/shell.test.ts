import { execFileSync, spawnSync } from "node:child_process";

import { describe, expect, it } from "vitest";

import { SandboxError } from "../../common/index.js";
import { commandWithEnv, interpretStatus } from "./command-line.js";
import { HeadTailBytes, OutputCapture, type OutputLog } from "./output-capture.js";
import { shellScript, shellScriptFiles } from "./shell-scripts.js";

const bytes = (text: string): Uint8Array => new TextEncoder().encode(text);

describe("the shell scripts", () => {
  it.each(shellScriptFiles())(
    "$name ($file) is valid bash, read from its .sh file",
    ({ name, file }) => {
      const script = shellScript(name);
      expect(script.startsWith("#!/usr/bin/env bash\n")).toBe(true);
      const check = spawnSync("bash", ["-n", file], { encoding: "utf8" });
      expect(check.stderr).toBe("");
      expect(check.status).toBe(0);
    },
  );
});

describe("commandWithEnv", () => {
  it("exports quoted values before the command, so bash sees them verbatim", () => {
    const command = commandWithEnv('printf "%s|%s" "$A" "$B"', { A: "it's $HOME", B: "x\ny" });
    const output = execFileSync("bash", ["-c", command], { encoding: "utf8" });
    expect(output).toBe("it's $HOME|x\ny");
  });

  it("leaves the command alone without env and refuses names bash cannot export", () => {
    expect(commandWithEnv("true", undefined)).toBe("true");
    expect(() => commandWithEnv("true", { "A;rm -rf /": "x" })).toThrow(SandboxError);
    expect(() => commandWithEnv("true", { "1A": "x" })).toThrow(SandboxError);
    expect(() => commandWithEnv("true", { A: "a\0b" })).toThrow(SandboxError);
    expect(() => commandWithEnv("echo a\0b", undefined)).toThrow(/NUL byte/);
  });
});

describe("interpretStatus", () => {
  it("reads 128+N of a death signal as the signal, other statuses as exit codes", () => {
    expect(interpretStatus(0)).toEqual({ exitCode: 0 });
    expect(interpretStatus(1)).toEqual({ exitCode: 1 });
    expect(interpretStatus(137)).toEqual({ exitCode: null, signal: "SIGKILL" });
    expect(interpretStatus(139)).toEqual({ exitCode: null, signal: "SIGSEGV" });
    expect(interpretStatus(143)).toEqual({ exitCode: null, signal: "SIGTERM" });
    // SIGPIPE stays an exit code: pipelines make it routinely.
    expect(interpretStatus(141)).toEqual({ exitCode: 141 });
    expect(interpretStatus(255)).toEqual({ exitCode: 255 });
  });
});

describe("HeadTailBytes", () => {
  it("keeps everything up to the limit", () => {
    const buffer = new HeadTailBytes(10);
    buffer.push(bytes("hello"));
    buffer.push(bytes("world"));
    expect(buffer.truncated).toBe(false);
    expect(buffer.text()).toBe("helloworld");
  });

  it("keeps head and tail past the limit and names what it dropped", () => {
    const buffer = new HeadTailBytes(10);
    for (const piece of ["0123", "4567", "89ab", "cdef", "ghij"]) buffer.push(bytes(piece));
    expect(buffer.truncated).toBe(true);
    expect(buffer.totalBytes).toBe(20);
    expect(buffer.text()).toBe("01234\n[… 10 bytes omitted …]\nfghij");
  });

  it("never cuts a UTF-8 character in half", () => {
    const buffer = new HeadTailBytes(7);
    buffer.push(bytes("aé€"));
    buffer.push(bytes("x".repeat(20)));
    buffer.push(bytes("€é"));
    const text = buffer.text();
    expect(text).not.toContain("\uFFFD");
    expect(text.startsWith("aé")).toBe(true);
    expect(text.endsWith("é")).toBe(true);
  });
});

class MemoryLog implements OutputLog {
  readonly path = "/tmp/test.log";
  readonly chunks: Uint8Array[] = [];
  closed = false;
  async write(chunk: Uint8Array): Promise<void> {
    await Promise.resolve();
    this.chunks.push(chunk.slice());
  }
  async close(): Promise<boolean> {
    await Promise.resolve();
    this.closed = true;
    return true;
  }
  text(): string {
    return Buffer.concat(this.chunks).toString("utf8");
  }
}

describe("OutputCapture", () => {
  it("opens no log while both streams fit", async () => {
    let opened = 0;
    const capture = new OutputCapture({
      maxBytes: 100,
      openLog: () => {
        opened++;
        return Promise.resolve(new MemoryLog());
      },
    });
    await capture.push("stdout", bytes("out"));
    await capture.push("stderr", bytes("err"));
    expect(await capture.finish()).toEqual({ stdout: "out", stderr: "err", truncated: false });
    expect(opened).toBe(0);
  });

  it("on overflow saves everything, both streams in arrival order, and returns its path", async () => {
    const log = new MemoryLog();
    const seen: string[] = [];
    const capture = new OutputCapture({
      maxBytes: 8,
      openLog: () => Promise.resolve(log),
      onStdout: (chunk) => seen.push(`o:${Buffer.from(chunk).toString()}`),
      onStderr: (chunk) => seen.push(`e:${Buffer.from(chunk).toString()}`),
    });
    await capture.push("stdout", bytes("aaaa"));
    await capture.push("stderr", bytes("E1"));
    await capture.push("stdout", bytes("bbbbbbbb"));
    await capture.push("stdout", bytes("cccc"));
    const result = await capture.finish();
    expect(result.truncated).toBe(true);
    expect(result.fullOutputPath).toBe("/tmp/test.log");
    expect(result.stderr).toBe("E1");
    expect(result.stdout).toMatch(/^aaaa\n\[… 8 bytes omitted …\]\ncccc$/);
    expect(log.text()).toBe("aaaaE1bbbbbbbbcccc");
    expect(log.closed).toBe(true);
    expect(seen).toEqual(["o:aaaa", "e:E1", "o:bbbbbbbb", "o:cccc"]);
  });

  it("caps the log itself and says so at its end", async () => {
    const log = new MemoryLog();
    const capture = new OutputCapture({
      maxBytes: 4,
      maxLogBytes: 10,
      openLog: () => Promise.resolve(log),
    });
    for (let i = 0; i < 5; i++) await capture.push("stdout", bytes("xxxxxx"));
    await capture.finish();
    expect(log.text()).toMatch(/^x{10}\n\[cordon: output past 10 bytes was not saved\]\n$/);
  });

  it("reports no log path when the log could not be saved", async () => {
    const capture = new OutputCapture({
      maxBytes: 2,
      openLog: () => Promise.reject(new Error("tmp is full")),
    });
    await capture.push("stdout", bytes("overflowing"));
    const result = await capture.finish();
    expect(result.truncated).toBe(true);
    expect(result.fullOutputPath).toBeUndefined();
  });
});
