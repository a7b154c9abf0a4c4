import { describe, expect, it } from "vitest";

import { FileOperationError, sleep } from "../../src/common/index.js";
import type { ProcessOutput, Sandbox } from "../../src/sandbox/index.js";

/**
 * The behaviour every `Sandbox` owes the tools, written once and run against each
 * implementation (MemorySandbox, HostSandbox, DockerSandbox): a tool that works on one works on
 * all. A sandbox whose commands are scripted (MemorySandbox) runs the file contract only; the
 * command, symlink and background-process contracts need a real shell.
 */
export interface SandboxContractSubject {
  /** A sandbox whose workdir is an empty, writable directory, fresh for the suite. */
  sandbox: () => Sandbox;
  /** Whether `exec` runs real bash (false: scripted; only the file contract applies). */
  runsCommands: boolean;
}

export function describeSandboxContract(name: string, subject: SandboxContractSubject): void {
  const bytes = (text: string): Uint8Array => new TextEncoder().encode(text);
  const text = (data: Uint8Array): string => new TextDecoder().decode(data);
  /** A directory of its own per test, so tests never see each other's files. */
  let counter = 0;
  const fresh = (): string => `contract-${process.pid}-${++counter}`;

  async function fileError(work: Promise<unknown>): Promise<FileOperationError> {
    const caught = await work.then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(caught).toBeInstanceOf(FileOperationError);
    return caught as FileOperationError;
  }

  describe(`${name}: the Sandbox contract`, () => {
    it("is exec, files and processes: file operations live on sandbox.files only", () => {
      const sandbox = subject.sandbox();
      expect(typeof sandbox.exec).toBe("function");
      const operations = ["readFile", "writeFile", "stat", "list", "mkdir", "remove", "rename"];
      for (const operation of operations) {
        expect(typeof (sandbox.files as unknown as Record<string, unknown>)[operation]).toBe(
          "function",
        );
        // A file method on the sandbox itself would be a second way in to keep in step.
        expect(operation in sandbox).toBe(false);
      }
      expect(typeof sandbox.processes.start).toBe("function");
    });

    describe("files", () => {
      it("writes and reads back bytes exactly, creating parent directories", async () => {
        const sandbox = subject.sandbox();
        const dir = fresh();
        const data = new Uint8Array([0, 1, 2, 255, 10, 13, 0x80]);
        await sandbox.files.writeFile(`${dir}/a/b/bin.dat`, data);
        expect([...(await sandbox.files.readFile(`${dir}/a/b/bin.dat`))]).toEqual([...data]);
        await sandbox.files.writeFile(`${dir}/a/b/bin.dat`, "replaced");
        expect(text(await sandbox.files.readFile(`${dir}/a/b/bin.dat`))).toBe("replaced");
      });

      it("stats files and directories, and answers undefined for nothing", async () => {
        const sandbox = subject.sandbox();
        const dir = fresh();
        await sandbox.files.writeFile(`${dir}/five.txt`, "12345");
        const file = await sandbox.files.stat(`${dir}/five.txt`);
        expect(file).toMatchObject({ type: "file", size: 5 });
        expect(file?.path).toBe(`${sandbox.workdir}/${dir}/five.txt`);
        expect((await sandbox.files.stat(dir))?.type).toBe("directory");
        expect(await sandbox.files.stat(`${dir}/missing`)).toBeUndefined();
      });

      it("lists direct children, nested ones with depth, and says when the limit cut it", async () => {
        const sandbox = subject.sandbox();
        const dir = fresh();
        await sandbox.files.writeFile(`${dir}/b.txt`, "b");
        await sandbox.files.writeFile(`${dir}/a.txt`, "aa");
        await sandbox.files.writeFile(`${dir}/sub/c.txt`, "c");
        const top = await sandbox.files.list(dir);
        expect(top.truncated).toBe(false);
        expect(top.entries.map((e) => [e.name, e.type]).sort()).toEqual([
          ["a.txt", "file"],
          ["b.txt", "file"],
          ["sub", "directory"],
        ]);
        expect(top.entries.find((e) => e.name === "a.txt")?.size).toBe(2);
        const deep = await sandbox.files.list(dir, { depth: 2 });
        expect(deep.entries.map((e) => e.name)).toContain("sub/c.txt");
        const cut = await sandbox.files.list(dir, { limit: 2 });
        expect(cut).toMatchObject({ truncated: true });
        expect(cut.entries).toHaveLength(2);
      });

      it("fails with a reason: missing file, a directory read, too large, no parent", async () => {
        const sandbox = subject.sandbox();
        const dir = fresh();
        await sandbox.files.mkdir(dir);
        expect((await fileError(sandbox.files.readFile(`${dir}/missing.txt`))).reason).toBe(
          "not_found",
        );
        expect((await fileError(sandbox.files.readFile(dir))).reason).toBe("is_directory");
        expect((await fileError(sandbox.files.list(`${dir}/missing`))).reason).toBe("not_found");
        await sandbox.files.writeFile(`${dir}/big.txt`, "x".repeat(100));
        expect(
          (await fileError(sandbox.files.readFile(`${dir}/big.txt`, { maxBytes: 10 }))).reason,
        ).toBe("too_large");
        const orphan = sandbox.files.writeFile(`${dir}/no/parent.txt`, "x", {
          createParents: false,
        });
        expect((await fileError(orphan)).reason).toBe("not_found");
      });

      it("makes directories, renames and removes", async () => {
        const sandbox = subject.sandbox();
        const dir = fresh();
        await sandbox.files.mkdir(`${dir}/x/y`);
        expect((await sandbox.files.stat(`${dir}/x/y`))?.type).toBe("directory");
        await sandbox.files.writeFile(`${dir}/x/y/f.txt`, "f");
        await sandbox.files.rename(`${dir}/x/y/f.txt`, `${dir}/x/g.txt`);
        expect(await sandbox.files.stat(`${dir}/x/y/f.txt`)).toBeUndefined();
        expect(text(await sandbox.files.readFile(`${dir}/x/g.txt`))).toBe("f");
        await sandbox.files.remove(`${dir}/x/g.txt`);
        expect(await sandbox.files.stat(`${dir}/x/g.txt`)).toBeUndefined();
        await sandbox.files.remove(`${dir}/x`, { recursive: true });
        expect(await sandbox.files.stat(`${dir}/x`)).toBeUndefined();
        expect((await fileError(sandbox.files.remove(`${dir}/x`))).reason).toBe("not_found");
      });
    });

    describe.runIf(subject.runsCommands)("commands", () => {
      it("returns the exit code with stdout and stderr apart, in the workdir", async () => {
        const sandbox = subject.sandbox();
        const result = await sandbox.exec("echo out; echo err >&2; pwd; exit 3");
        expect(result).toMatchObject({
          exitCode: 3,
          stdout: `out\n${sandbox.workdir}\n`,
          stderr: "err\n",
          truncated: false,
          timedOut: false,
          oomKilled: false,
        });
        expect((await sandbox.exec("true")).exitCode).toBe(0);
        expect(await sandbox.exec("kill -9 $$")).toMatchObject({
          exitCode: null,
          signal: "SIGKILL",
          timedOut: false,
        });
      });

      it("runs in a given cwd, passes stdin and env, and refuses a missing cwd", async () => {
        const sandbox = subject.sandbox();
        const dir = fresh();
        await sandbox.files.mkdir(dir);
        const result = await sandbox.exec('pwd; cat; echo "$GREETING"', {
          cwd: dir,
          stdin: "from stdin\n",
          env: { GREETING: "it's me" },
        });
        expect(result.stdout).toBe(`${sandbox.workdir}/${dir}\nfrom stdin\nit's me\n`);
        const refused = await fileError(sandbox.exec("true", { cwd: `${dir}/missing` }));
        expect(refused.reason).toBe("not_found");
      });

      it("kills the whole process tree when the timeout hits", async () => {
        const sandbox = subject.sandbox();
        // A duration no other test uses names this test's processes.
        const marker = `sleep ${3000 + (process.pid % 997)}.5`;
        const result = await sandbox.exec(`(${marker} &) ; ${marker} & ${marker}`, {
          timeoutMs: 500,
        });
        expect(result).toMatchObject({ timedOut: true, exitCode: null, signal: "SIGKILL" });
        const left = await sandbox.exec(`ps -eo args= | grep -c '^${marker}$' || true`);
        expect(left.stdout.trim()).toBe("0");
      });

      it("caps output to head and tail and keeps the full output in a log it can read", async () => {
        const sandbox = subject.sandbox();
        const result = await sandbox.exec("seq 1 100000", { maxOutputBytes: 1000 });
        expect(result.truncated).toBe(true);
        expect(result.stdout.length).toBeLessThan(2000);
        expect(result.stdout).toMatch(/^1\n2\n/);
        expect(result.stdout).toMatch(/\n100000\n$/);
        const log = text(await sandbox.files.readFile(result.fullOutputPath ?? "(none)"));
        expect(log.split("\n")).toHaveLength(100001);
      });
    });

    describe.runIf(subject.runsCommands)("symbolic links", () => {
      it("reads and writes through a link to its target; a dangling link stats as a link", async () => {
        const sandbox = subject.sandbox();
        const dir = fresh();
        await sandbox.files.writeFile(`${dir}/target.txt`, "target");
        await sandbox.exec("ln -s target.txt link.txt && ln -s nowhere dangling", { cwd: dir });
        expect(text(await sandbox.files.readFile(`${dir}/link.txt`))).toBe("target");
        expect((await sandbox.files.stat(`${dir}/link.txt`))?.type).toBe("file");
        expect((await sandbox.files.stat(`${dir}/dangling`))?.type).toBe("symlink");
        expect((await fileError(sandbox.files.readFile(`${dir}/dangling`))).reason).toBe(
          "not_found",
        );
        await sandbox.files.writeFile(`${dir}/link.txt`, bytes("through the link"));
        expect(text(await sandbox.files.readFile(`${dir}/target.txt`))).toBe("through the link");
        const listed = await sandbox.files.list(dir);
        expect(listed.entries.find((e) => e.name === "link.txt")?.type).toBe("symlink");
      });
    });

    describe.runIf(subject.runsCommands)("background processes", () => {
      async function pollUntil(
        sandbox: Sandbox,
        id: string,
        done: (seen: string, last: ProcessOutput) => boolean,
      ): Promise<{ seen: string; last: ProcessOutput }> {
        let seen = "";
        for (let i = 0; i < 300; i++) {
          const last = await sandbox.processes.poll(id);
          seen += last.output;
          if (done(seen, last)) return { seen, last };
          await sleep(50);
        }
        throw new Error(`process ${id} never got there; output so far: ${JSON.stringify(seen)}`);
      }

      it("starts one, takes its stdin, reports its output and exit code", async () => {
        const sandbox = subject.sandbox();
        const started = await sandbox.processes.start(
          'echo ready; read line; echo "got $line"; exit 4',
        );
        expect(started.state).toBe("running");
        await pollUntil(sandbox, started.id, (seen) => seen.includes("ready"));
        await sandbox.processes.write(started.id, "hello\n");
        const { seen, last } = await pollUntil(
          sandbox,
          started.id,
          (_seen, output) => output.info.state === "exited",
        );
        expect(seen).toContain("got hello");
        expect(last.info.exitCode).toBe(4);
        expect((await sandbox.processes.list()).map((p) => p.id)).toContain(started.id);
      });

      it("kills one with its whole tree", async () => {
        const sandbox = subject.sandbox();
        const marker = `sleep ${4000 + (process.pid % 997)}.5`;
        const started = await sandbox.processes.start(`${marker} & ${marker}`);
        const killed = await sandbox.processes.kill(started.id);
        expect(killed.state).toBe("exited");
        const left = await sandbox.exec(`ps -eo args= | grep -c '^${marker}$' || true`);
        expect(left.stdout.trim()).toBe("0");
      });
    });
  });
}
