import { mkdir, mkdtemp, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";

import { afterAll, beforeAll, describe, expect, it } from "vitest";

import { workspaceUsageBytes } from "./disk-watchdog.js";

describe("workspaceUsageBytes", () => {
  let root: string;
  beforeAll(async () => {
    root = await mkdtemp(path.join(tmpdir(), "cordon-du-"));
  });
  afterAll(() => rm(root, { recursive: true, force: true }));

  it("counts what the files take, and never what a link points at", async () => {
    const outside = path.join(root, "outside");
    const workspace = path.join(root, "workspace");
    await mkdir(outside);
    await mkdir(path.join(workspace, "src"), { recursive: true });
    await writeFile(path.join(outside, "big"), Buffer.alloc(8 * 1024 ** 2, 1));
    await writeFile(path.join(workspace, "src", "data"), Buffer.alloc(1024 ** 2, 1));
    // The agent's links to big trees elsewhere must not count (nor be walked).
    await symlink(outside, path.join(workspace, "to-outside"));
    await symlink("/usr", path.join(workspace, "src", "to-usr"));

    const used = await workspaceUsageBytes(workspace);
    expect(used).toBeGreaterThanOrEqual(1024 ** 2);
    expect(used).toBeLessThan(2 * 1024 ** 2);
  });
});
