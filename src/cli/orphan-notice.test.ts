import { describe, expect, it } from "vitest";

import { noticesOrphans } from "./orphan-notice-commands.js";
import { describeOrphans } from "./orphan-notice.js";

describe("the orphan notice", () => {
  it("comes after commands that use the sandboxes, not after those that name orphans themselves", () => {
    for (const command of ["cordon exec", "cordon run", "cordon diff", "cordon sessions list"]) {
      expect(noticesOrphans(command), command).toBe(true);
    }
    for (const command of [
      "cordon sandbox list",
      "cordon sandbox prune",
      "cordon doctor",
      "cordon config show",
      "cordon",
    ]) {
      expect(noticesOrphans(command), command).toBe(false);
    }
  });

  it("says how many, how many hold a loop device, and the command that releases them", () => {
    const orphan = (mounted: boolean) => ({ path: "/w", diskImage: mounted, mounted });
    expect(describeOrphans([orphan(true)])).toBe(
      "cordon: 1 private workspace outlives its container (still mounted, holding a loop device), removed outside cordon: `cordon sandbox prune` releases it and keeps work never applied; `cordon sandbox list` names it\n",
    );
    expect(describeOrphans([orphan(false), orphan(false)])).toContain(
      "cordon: 2 private workspaces outlive their containers, removed outside cordon: `cordon sandbox prune`",
    );
    expect(describeOrphans([orphan(true), orphan(false)])).toContain(
      "(1 still mounted, holding a loop device)",
    );
  });
});
