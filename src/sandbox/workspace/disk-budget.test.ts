import { chmod, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";

import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";

import {
  diskImagePath,
  notEnforcedWarning,
  overrideDiskBudgetSupport,
  probeDiskBudgetSupport,
  workspaceDiskFor,
  type DiskHostFacts,
} from "./disk-budget.js";

/** CapEff of a root process with every capability, and of an unprivileged one. */
const allCaps = "Name:\tnode\nCapEff:\t000001ffffffffff\n";
const noCaps = "Name:\tnode\nCapEff:\t0000000000000000\n";

describe("probeDiskBudgetSupport", () => {
  let bin: string;
  let loopControl: string;
  beforeAll(async () => {
    bin = await mkdtemp(path.join(tmpdir(), "cordon-disk-probe-"));
    for (const tool of ["mkfs.ext4", "mount", "umount"]) {
      await writeFile(path.join(bin, tool), "#!/bin/sh\n");
      await chmod(path.join(bin, tool), 0o755);
    }
    loopControl = path.join(bin, "loop-control");
    await writeFile(loopControl, "");
  });
  afterAll(() => rm(bin, { recursive: true, force: true }));

  const host = (overrides: Partial<DiskHostFacts>): DiskHostFacts => ({
    processStatus: () => Promise.resolve(allCaps),
    searchPath: [bin],
    loopControl,
    ...overrides,
  });

  it("enforces with the right to mount, the tools and loop devices", async () => {
    const support = await probeDiskBudgetSupport(host({}));
    expect(support).toEqual({
      enforced: true,
      tools: {
        mkfs: path.join(bin, "mkfs.ext4"),
        mount: path.join(bin, "mount"),
        umount: path.join(bin, "umount"),
      },
    });
  });

  it("does not without CAP_SYS_ADMIN, and says to run as root or opt out", async () => {
    const support = await probeDiskBudgetSupport(
      host({ processStatus: () => Promise.resolve(noCaps) }),
    );
    expect(support).toMatchObject({
      enforced: false,
      reason: expect.stringMatching(/CAP_SYS_ADMIN/) as unknown,
    });
    if (support.enforced) return;
    expect(support.fix).toMatch(/run cordon as root.*sandbox\.disk to "unlimited"/);
    expect(notEnforcedWarning(support)).toMatch(
      /^sandbox\.disk is not enforced: .*plain directory, only measured while in use: the sandbox is stopped once past the budget/,
    );
  });

  it("does not without mkfs.ext4, naming the package", async () => {
    const support = await probeDiskBudgetSupport(host({ searchPath: ["/nonexistent"] }));
    expect(support).toMatchObject({ enforced: false, reason: "mkfs.ext4 is not installed" });
    expect(support.enforced ? "" : support.fix).toMatch(/apt-get install e2fsprogs/);
  });

  it("does not without loop devices", async () => {
    const support = await probeDiskBudgetSupport(
      host({ loopControl: "/nonexistent/loop-control" }),
    );
    expect(support.enforced ? "" : support.fix).toMatch(/modprobe loop/);
  });
});

describe("diskImagePath", () => {
  it("is a hidden file beside the workspace, never inside it", () => {
    expect(diskImagePath("/state/workspaces/cordon-a")).toBe(
      "/state/workspaces/.cordon-a.disk.img",
    );
  });
});

describe("workspaceDiskFor where the budget cannot be enforced", () => {
  afterEach(() => overrideDiskBudgetSupport(undefined));

  it("makes plain directories and says so once per process, not for each sandbox", async () => {
    overrideDiskBudgetSupport({ enforced: false, reason: "no mounting here", fix: "run as root" });
    const first: string[] = [];
    const second: string[] = [];
    expect(await workspaceDiskFor(64 * 1024 ** 2, first)).toBe(undefined);
    expect(await workspaceDiskFor(64 * 1024 ** 2, second)).toBe(undefined);
    expect(first).toEqual([
      expect.stringMatching(/^sandbox\.disk is not enforced: no mounting here/),
    ]);
    expect(second).toEqual([]);
  });
});
