import { spawnSync } from "node:child_process";
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { MemorySandbox, type ExecScript } from "../testing/memory-sandbox.js";
import { toolHarness } from "../testing/harness.js";
import { limits } from "./limits.js";

/**
 * exec runs the tool's real command line with real bash, against a fake `rg` that records its
 * argv and prints canned output, so quoting and the `head` bound are tested for real.
 */
let dir: string;
let argsFile: string;
let outputFile: string;
/** A PATH like the system's but certainly without rg (the host may have ripgrep installed). */
let noRgPath: string;

// Made once: linking every system binary takes seconds on a loaded machine.
beforeAll(() => {
  noRgPath = mkdtempSync(join(tmpdir(), "cordon-no-rg-"));
  spawnSync("bash", [
    "-c",
    'for f in /usr/bin/* /bin/*; do n="${f##*/}"; [[ $n == rg || -e "$1/$n" ]] || ln -s "$f" "$1/$n"; done',
    "link",
    noRgPath,
  ]);
}, 60_000);

afterAll(() => {
  rmSync(noRgPath, { recursive: true, force: true });
});

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "cordon-tools-"));
  argsFile = join(dir, "args");
  outputFile = join(dir, "output");
  writeFileSync(outputFile, "");
  const bin = join(dir, "bin");
  spawnSync("mkdir", [bin]);
  writeFileSync(
    join(bin, "rg"),
    `#!/bin/bash\nfor a in "$@"; do printf '%s\\0' "$a"; done > "$ARGS_FILE"\ncat "$OUTPUT_FILE"\nexit "\${RG_EXIT:-0}"\n`,
  );
  chmodSync(join(bin, "rg"), 0o755);
});

afterEach(() => {
  rmSync(dir, { recursive: true, force: true });
});

function bashWithFakeRg(options: { rgExit?: number; withRg?: boolean } = {}): ExecScript {
  return (command) => {
    const path = options.withRg === false ? noRgPath : `${join(dir, "bin")}:/usr/bin:/bin`;
    const run = spawnSync("bash", ["-c", command], {
      cwd: dir,
      encoding: "utf8",
      env: {
        PATH: path,
        ARGS_FILE: argsFile,
        OUTPUT_FILE: outputFile,
        RG_EXIT: String(options.rgExit ?? 0),
      },
    });
    return { exitCode: run.status, stdout: run.stdout, stderr: run.stderr };
  };
}

function rgArgs(): string[] {
  return readFileSync(argsFile, "utf8").split("\0").slice(0, -1);
}

const hostile = [
  "-e rm -rf /",
  'it\'s "quoted"',
  "new\nline",
  "$(touch PWNED)",
  "x; touch INJECTED",
  "x' ; touch INJECTED; '",
  "`id`",
  "ünïcødé ✓",
  "--files",
  "; echo injected",
];

describe("grep", () => {
  it("passes the pattern after -e and the path after --, exactly, for hostile values", async () => {
    for (const value of hostile) {
      const sandbox = new MemorySandbox({ exec: bashWithFakeRg({ rgExit: 1 }) });
      // grep stats its path first (the sandbox confines it), so the path must exist.
      await sandbox.files.writeFile(value.endsWith("/") ? `${value}x` : value, "");
      const { call } = toolHarness(sandbox);
      await call("grep", { pattern: value, path: value, glob: value, ignore_case: true });
      const args = rgArgs();
      expect(args.slice(-4)).toEqual(["-e", value, "--", value]);
      expect(args).toContain(`--glob=${value}`);
      expect(args).toContain("--ignore-case");
      expect(args).toContain("--null");
    }
    expect(existsSync(join(dir, "PWNED"))).toBe(false);
    expect(existsSync(join(dir, "INJECTED"))).toBe(false);
  });

  it("runs in the working directory with a default path of .", async () => {
    const sandbox = new MemorySandbox({ exec: bashWithFakeRg({ rgExit: 1 }) });
    const { call, text } = toolHarness(sandbox);
    const result = await call("grep", { pattern: "TODO" });
    expect(text(result)).toBe('No matches for "TODO" in ..');
    expect(result.isError).toBe(false);
    expect(rgArgs().slice(-2)).toEqual(["--", "."]);
    const [, options] = sandbox.callsTo("exec")[0]?.args ?? [];
    expect(options).toMatchObject({ cwd: "/workspace" });
  });

  it("parses path\\0line:text records, including paths with newlines", async () => {
    writeFileSync(
      outputFile,
      "src/a.ts\u00003:const x = 1; // TODO\nodd\nname.ts\u000010:TODO: here\n",
    );
    const sandbox = new MemorySandbox({ exec: bashWithFakeRg() });
    const { call, text } = toolHarness(sandbox);
    const result = await call("grep", { pattern: "TODO" });
    expect(text(result)).toBe('src/a.ts:3:const x = 1; // TODO\n"odd\\nname.ts":10:TODO: here');
  });

  it("bounds the matches and adds a 'more' marker", async () => {
    const lines = Array.from({ length: 5000 }, (_, i) => `f.txt\u0000${i + 1}:match`).join("\n");
    writeFileSync(outputFile, `${lines}\n`);
    const sandbox = new MemorySandbox({ exec: bashWithFakeRg() });
    const { call, text } = toolHarness(sandbox);
    const out = text(await call("grep", { pattern: "match" })).split("\n");
    expect(out).toHaveLength(limits.grepMatches + 1);
    expect(out.at(-1)).toMatch(/more matches not shown \(stopped at 300\)/);
  });

  it("reports a bad regex from ripgrep as an error result", async () => {
    const sandbox = new MemorySandbox({
      exec: () => ({
        exitCode: 2,
        stdout: "",
        stderr: "regex parse error:\n    (\n    ^\nerror: unclosed group",
      }),
    });
    const { call, text } = toolHarness(sandbox);
    const result = await call("grep", { pattern: "(" });
    expect(result.isError).toBe(true);
    expect(text(result)).toMatch(/grep failed: regex parse error/);
  });

  it("says how to work around a sandbox without ripgrep", async () => {
    const sandbox = new MemorySandbox({ exec: bashWithFakeRg({ withRg: false }) });
    const { call, text } = toolHarness(sandbox);
    const result = await call("grep", { pattern: "x" });
    expect(result.isError).toBe(true);
    expect(text(result)).toMatch(/needs ripgrep.*grep -rn/);
  });
});

describe("find", () => {
  it("runs rg --files in the searched directory with the glob quoted", async () => {
    writeFileSync(outputFile, "b.ts\u0000a.ts\u0000dir with space/c.ts\u0000");
    const sandbox = new MemorySandbox({ files: { "src/x": "" }, exec: bashWithFakeRg() });
    const { call, text } = toolHarness(sandbox);
    const result = await call("find", { pattern: "*.{ts,js} $(id)", path: "src" });
    expect(text(result)).toBe("a.ts\nb.ts\ndir with space/c.ts");
    expect(rgArgs()).toEqual([
      "--files",
      "--hidden",
      "--null",
      "--glob=!.git",
      "--glob=*.{ts,js} $(id)",
    ]);
    expect(sandbox.callsTo("exec")[0]?.args[1]).toMatchObject({ cwd: "/workspace/src" });
  });

  it("keeps names with newlines whole and bounds the result with a 'more' marker", async () => {
    const names = Array.from({ length: 800 }, (_, i) => `f${String(i).padStart(4, "0")}\nx.ts`);
    writeFileSync(outputFile, names.map((name) => `${name}\u0000`).join(""));
    const sandbox = new MemorySandbox({ exec: bashWithFakeRg() });
    const { call, text } = toolHarness(sandbox);
    const out = text(await call("find", { pattern: "*.ts" })).split("\n");
    expect(out[0]).toBe(JSON.stringify("f0000\nx.ts"));
    expect(out).toHaveLength(limits.findResults + 1);
    expect(out.at(-1)).toMatch(/more matches not shown/);
  });

  it("falls back to listing and matching in TypeScript when rg is missing", async () => {
    const sandbox = new MemorySandbox({
      files: {
        "src/a.ts": "",
        "src/deep/b.ts": "",
        "src/c.js": "",
        ".git/HEAD.ts": "",
        "-dash.ts": "",
      },
      exec: bashWithFakeRg({ withRg: false }),
    });
    const { call, text } = toolHarness(sandbox);
    expect(text(await call("find", { pattern: "*.ts" }))).toBe("-dash.ts\nsrc/a.ts\nsrc/deep/b.ts");
    expect(text(await call("find", { pattern: "src/**/*.{ts,js}" }))).toBe(
      "src/a.ts\nsrc/c.js\nsrc/deep/b.ts",
    );
    expect(text(await call("find", { pattern: "*.py" }))).toBe(
      "No files match *.py under /workspace.",
    );
  });

  it("refuses a missing directory or a file as the search root", async () => {
    const sandbox = new MemorySandbox({ files: { "f.txt": "" } });
    const { call, text } = toolHarness(sandbox);
    expect(text(await call("find", { pattern: "*", path: "nope" }))).toMatch(/does not exist/);
    expect(text(await call("find", { pattern: "*", path: "f.txt" }))).toMatch(/is a file/);
    expect(sandbox.callsTo("exec")).toEqual([]);
  });
});

describe("ls", () => {
  it("lists entries with types and sizes, sorted", async () => {
    const sandbox = new MemorySandbox({
      files: { "b.txt": "12345", "a/inner.txt": "x", "big.bin": new Uint8Array(3 * 1024 * 1024) },
    });
    const { call, text } = toolHarness(sandbox);
    expect(text(await call("ls", {}))).toBe("/workspace:\na/\nb.txt  (5 B)\nbig.bin  (3.0 MiB)");
    expect(text(await call("ls", { depth: 2 }))).toBe(
      "/workspace:\na/\na/inner.txt  (1 B)\nb.txt  (5 B)\nbig.bin  (3.0 MiB)",
    );
    expect(sandbox.callsTo("files.list")[0]?.args[1]).toMatchObject({
      depth: 1,
      limit: limits.lsEntries,
    });
  });

  it("marks a bounded listing with 'more'", async () => {
    const files = Object.fromEntries(Array.from({ length: 700 }, (_, i) => [`d/f${i}`, ""]));
    const sandbox = new MemorySandbox({ files });
    const { call, text } = toolHarness(sandbox);
    const out = text(await call("ls", { path: "d" })).split("\n");
    expect(out).toHaveLength(1 + limits.lsEntries + 1);
    expect(out.at(-1)).toMatch(/more entries not shown \(stopped at 500\)/);
  });

  it("handles empty directories, files and missing paths", async () => {
    const sandbox = new MemorySandbox({ files: { "f.txt": "abc" } });
    await sandbox.files.mkdir("empty");
    const { call, text } = toolHarness(sandbox);
    expect(text(await call("ls", { path: "empty" }))).toBe("/workspace/empty:\n(empty directory)");
    expect(text(await call("ls", { path: "f.txt" }))).toMatch(/is a file \(3 bytes\)/);
    expect((await call("ls", { path: "missing" })).isError).toBe(true);
    expect((await call("ls", { depth: 0 })).isError).toBe(true);
  });
});
