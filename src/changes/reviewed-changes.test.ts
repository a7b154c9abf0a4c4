import { mkdir, mkdtemp, readdir, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";

import { afterEach, beforeEach, describe, expect, it } from "vitest";

import { seedMarkerPath } from "../sandbox/index.js";
import {
  forgetShownChanges,
  lastShownDigest,
  patchDigest,
  recordShownChanges,
} from "./reviewed-changes.js";
import { ForeignSeedError, assertSeededFrom } from "./seed-source.js";

describe("reviewed changes and seed source", () => {
  let root: string;
  beforeEach(async () => {
    root = await mkdtemp(path.join(tmpdir(), "cordon-reviewed-"));
  });
  afterEach(async () => {
    await rm(root, { recursive: true, force: true });
  });

  it("remembers the digest of what was shown, per container, until it is applied", async () => {
    const patch = Buffer.from("diff --git a/x b/x\n");
    expect(await lastShownDigest(root, "cordon-a")).toBeUndefined();
    const digest = await recordShownChanges(root, "cordon-a", patch);
    expect(digest).toBe(patchDigest(patch));
    expect(await lastShownDigest(root, "cordon-a")).toBe(digest);
    expect(await lastShownDigest(root, "cordon-b")).toBeUndefined();
    // A name that is not cordon's own cannot walk out of the changes folder.
    await recordShownChanges(root, "../../escape", patch);
    expect(await lastShownDigest(root, "../../escape")).toBe(digest);
    expect(await readdir(root)).toEqual(["changes"]);
    expect(await readdir(path.dirname(root))).not.toContain("escape.sha256");
    await forgetShownChanges(root, "cordon-a");
    expect(await lastShownDigest(root, "cordon-a")).toBeUndefined();
  });

  it("accepts a copy seeded from this workspace by any path to it, and refuses another", async () => {
    const project = path.join(root, "project");
    const other = path.join(root, "other");
    const copy = path.join(root, "state", "copy");
    await mkdir(project);
    await mkdir(other);
    await mkdir(copy, { recursive: true });
    await symlink(project, path.join(root, "via-link"));
    await writeFile(seedMarkerPath(copy), JSON.stringify({ source: path.join(root, "via-link") }));
    await assertSeededFrom(copy, project, "main");
    const refused = await assertSeededFrom(copy, other, "main").catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(ForeignSeedError);
    expect((refused as Error).message).toBe(
      `the private copy of session main was seeded from ${project}, not from this workspace ${other}; its changes belong there`,
    );
    await writeFile(seedMarkerPath(copy), "{not json");
    await expect(assertSeededFrom(copy, project, "main")).rejects.toThrow(/cannot tell/);
  });
});
