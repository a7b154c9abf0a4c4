import { describe, expect, it } from "vitest";

import { builtinToolNames as policyNames } from "../src/policy/index.js";
import { builtinTools } from "../src/tools/index.js";

/**
 * The policy is pure and knows tools by name only; the tools module defines them. The two lists
 * must name the same tools, or a profile could allow a tool that does not exist (or miss one).
 */
describe("built-in tool names", () => {
  it("are the same in the policy's catalog and among the tools", () => {
    expect([...policyNames].sort()).toEqual(
      builtinTools()
        .map((tool) => tool.name)
        .sort(),
    );
  });
});
