import { describe, expect, it } from "vitest";

import { ConfigError } from "../../common/index.js";
import { resolveSandboxName } from "./sandbox-names.js";

const sandboxes = [
  { name: "cordon-api-session-agent-main-fix-1a2b", session: "agent:main:fix" },
  { name: "cordon-api-session-agent-main-main-3c4d", session: "agent:main:main" },
  { name: "cordon-web-session-agent-main-main-5e6f", session: "agent:main:main" },
];

describe("naming a sandbox on the command line", () => {
  it("takes the full name, a session's key or name, or a unique prefix", () => {
    expect(resolveSandboxName("cordon-web-session-agent-main-main-5e6f", sandboxes)).toBe(
      "cordon-web-session-agent-main-main-5e6f",
    );
    expect(resolveSandboxName("fix", sandboxes)).toBe("cordon-api-session-agent-main-fix-1a2b");
    expect(resolveSandboxName("agent:main:fix", sandboxes)).toBe(
      "cordon-api-session-agent-main-fix-1a2b",
    );
    expect(resolveSandboxName("cordon-web", sandboxes)).toBe(
      "cordon-web-session-agent-main-main-5e6f",
    );
  });

  it("refuses a word that fits several, naming each, and passes on one that fits none", () => {
    const error = (() => {
      try {
        resolveSandboxName("main", sandboxes);
      } catch (caught) {
        return caught;
      }
      return undefined;
    })();
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as ConfigError).message).toMatch(
      /"main" could mean 2 sandboxes: cordon-api-session-agent-main-main-3c4d, cordon-web/,
    );
    expect(() => resolveSandboxName("cordon-", sandboxes)).toThrow(/could mean 3 sandboxes/);
    expect(resolveSandboxName("nothing-like-it", sandboxes)).toBe("nothing-like-it");
  });
});
