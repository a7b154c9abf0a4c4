import { chmod, mkdir, mkdtemp, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";

import { afterEach, beforeEach, describe, expect, it } from "vitest";

import { selfCommand } from "./self-command.js";

describe("selfCommand: how a client config starts this cordon", () => {
  let root: string;
  let script: string;
  const nodePath = "/usr/local/bin/node";

  beforeEach(async () => {
    root = await mkdtemp(path.join(tmpdir(), "cordon-self-"));
    script = path.join(root, "lib", "node_modules", "cordon", "dist", "cli", "main.js");
    await mkdir(path.dirname(script), { recursive: true });
    await writeFile(script, "#!/usr/bin/env node\n");
    await chmod(script, 0o755);
  });

  afterEach(async () => {
    await rm(root, { recursive: true, force: true });
  });

  it('is "cordon" when that name on PATH is this program (a global install)', async () => {
    const bin = path.join(root, "bin");
    await mkdir(bin);
    await symlink(script, path.join(bin, "cordon"));
    expect(
      selfCommand({ script: path.join(bin, "cordon"), pathVariable: `/nowhere:${bin}`, nodePath }),
    ).toEqual({ command: "cordon", args: [] });
  });

  it("names the file itself for a local install, whose bin is not on the client's PATH", async () => {
    const localBin = path.join(root, "project", "node_modules", ".bin");
    await mkdir(localBin, { recursive: true });
    await symlink(script, path.join(localBin, "cordon"));
    const started = path.join(localBin, "cordon");
    expect(selfCommand({ script: started, pathVariable: "/usr/bin:/bin", nodePath })).toEqual({
      command: started,
      args: [],
    });
    // npx puts that directory on PATH for the command it runs; a client's PATH lacks it.
    expect(
      selfCommand({ script: started, pathVariable: `${localBin}:/usr/bin`, nodePath }),
    ).toEqual({ command: started, args: [] });
  });

  it("names the file when another cordon is first on PATH", async () => {
    const other = path.join(root, "other");
    await mkdir(other);
    await writeFile(path.join(other, "cordon"), "#!/bin/sh\n");
    await chmod(path.join(other, "cordon"), 0o755);
    expect(selfCommand({ script, pathVariable: other, nodePath })).toEqual({
      command: script,
      args: [],
    });
  });

  it("runs a checkout's script that is not executable through node", async () => {
    await chmod(script, 0o644);
    expect(selfCommand({ script, pathVariable: "", nodePath })).toEqual({
      command: nodePath,
      args: [script],
    });
  });
});
