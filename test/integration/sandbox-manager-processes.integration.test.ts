import { execFileSync, spawn } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";

import { afterAll, beforeAll, describe, expect, it } from "vitest";

import { labelKeys } from "../../src/sandbox/docker/container-options.js";
import { privateWorkspacePath, type SandboxSpec } from "../../src/sandbox/index.js";
import { dockerClient, removeContainer, requireSandboxImage } from "../support/docker.js";
import { testSandboxSpec } from "../support/sandbox-spec.js";
import { removeStateDirectory } from "../support/state-directory.js";

const repositoryRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const childScript = path.join(repositoryRoot, "test/support/acquire-in-child.mjs");

interface ChildResult {
  containerId?: string;
  fresh?: boolean;
  phases?: string[];
  error?: string;
}

/**
 * Separate processes acquiring one scope key at the same moment: each has its own in-process
 * lock, so only Docker's name uniqueness (a 409 for the losers, who then re-inspect) keeps them
 * to one container. cordon is compiled for the children (dist/ is ignored by git).
 */
describe("acquires from several processes at once", () => {
  const docker = dockerClient();
  let image: string;
  let root: string;
  let stateDirectory: string;
  let build: string;

  beforeAll(async () => {
    image = await requireSandboxImage();
    root = await mkdtemp(path.join(tmpdir(), "cordon-processes-"));
    stateDirectory = path.join(root, "home");
    build = path.join(repositoryRoot, "dist", `.test-build-${process.pid}`);
    execFileSync(
      process.execPath,
      [
        path.join(repositoryRoot, "node_modules/typescript/bin/tsc"),
        "-p",
        path.join(repositoryRoot, "tsconfig.build.json"),
        "--outDir",
        build,
        "--tsBuildInfoFile",
        path.join(build, ".tsbuildinfo"),
        "--declaration",
        "false",
        "--sourceMap",
        "false",
      ],
      { cwd: repositoryRoot, stdio: "inherit" },
    );
  });

  afterAll(async () => {
    const mine = await docker.listContainers({
      all: true,
      filters: { label: [`${labelKeys.home}=${stateDirectory}`] },
    });
    for (const info of mine) await removeContainer(docker.getContainer(info.Id));
    await removeStateDirectory(root);
    await rm(build, { recursive: true, force: true });
  });

  async function race(spec: SandboxSpec, processes: number): Promise<ChildResult[]> {
    const children = Array.from({ length: processes }, () =>
      spawn(process.execPath, [childScript, build, stateDirectory, image, JSON.stringify(spec)], {
        stdio: ["pipe", "pipe", "inherit"],
      }),
    );
    const outputs = children.map((child) =>
      createInterface({ input: child.stdout })[Symbol.asyncIterator](),
    );
    // Everyone loaded and waiting, then go at once.
    for (const output of outputs) expect((await output.next()).value).toBe("ready");
    for (const child of children) child.stdin.write("go\n");
    const results: ChildResult[] = [];
    for (const output of outputs) {
      const line = (await output.next()).value as string;
      results.push(JSON.parse(line) as ChildResult);
    }
    for (const child of children) child.stdin.end();
    return results;
  }

  it("share one container: one process creates it, the others reuse it", async () => {
    for (const round of [1, 2]) {
      const base = testSandboxSpec(`processes-${round}`, { spec: { agentWorkspace: root } });
      const privateWorkspace = privateWorkspacePath(stateDirectory, base.containerName);
      const spec: SandboxSpec = {
        ...base,
        privateWorkspace,
        mounts: [
          { source: privateWorkspace, target: "/workspace", readOnly: false, role: "workspace" },
        ],
      };
      const results = await race(spec, 4);
      expect(results.map((r) => r.error)).toEqual([undefined, undefined, undefined, undefined]);
      expect(new Set(results.map((r) => r.containerId)).size).toBe(1);
      expect(results.filter((r) => r.fresh)).toHaveLength(1);
      const named = await docker.listContainers({
        all: true,
        filters: { name: [spec.containerName] },
      });
      expect(named.map((c) => c.Id)).toEqual([results[0]?.containerId]);
      expect(named[0]?.State).toBe("running");
      // How many raced into create (the rest found it on their first look); logged, not asserted.
      const creators = results.filter((r) => r.phases?.includes("create")).length;
      console.info(`round ${round}: ${creators} of 4 processes tried to create`);
    }
  });
});
