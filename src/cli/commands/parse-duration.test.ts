import { describe, expect, it } from "vitest";

import { ConfigError } from "../../common/index.js";
import { parseDuration } from "./parse-duration.js";

describe("parseDuration", () => {
  it.each([
    ["30m", 30 * 60_000],
    ["2h", 2 * 3_600_000],
    ["7d", 7 * 86_400_000],
    ["1h30m", 90 * 60_000],
    ["45s", 45_000],
    ["250ms", 250],
    ["1.5h", 90 * 60_000],
    ["2W", 14 * 86_400_000],
    ["0s", 0],
  ])("reads %s", (text, ms) => {
    expect(parseDuration(text, "--idle")).toBe(ms);
  });

  it.each(["", "30", "m", "2 h", "2hours", "-1h", "1h-", "h1", "1y"])(
    "refuses %j, naming the flag and the format",
    (text) => {
      expect(() => parseDuration(text, "--max-age")).toThrow(ConfigError);
      expect(() => parseDuration(text, "--max-age")).toThrow(/--max-age/);
    },
  );
});
