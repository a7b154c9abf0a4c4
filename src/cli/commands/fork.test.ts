import { describe, expect, it } from "vitest";

import { forkStopLine } from "./fork.js";

describe("forkStopLine", () => {
  it("says the forks were removed when none was kept", () => {
    expect(forkStopLine(0)).toBe(
      "stopped: forks made so far were removed; the session is unchanged",
    );
  });

  it("does not claim a kept fork was removed", () => {
    expect(forkStopLine(1)).toMatch(/but one fork was kept: it was in use \(named above\)/);
    expect(forkStopLine(2)).toMatch(/but 2 forks were kept: they were in use/);
  });
});
