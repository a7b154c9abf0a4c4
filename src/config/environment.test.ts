import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";

import { packageRoot } from "../common/index.js";
import { checkEnvironment, environmentVariables } from "./environment.js";

const failure = (env: Record<string, string>): string => {
  try {
    checkEnvironment(env);
  } catch (error) {
    return (error as Error).message;
  }
  return "no error";
};

describe("checkEnvironment", () => {
  it.each([
    ["CORDON_HOME", "state", "an absolute directory path"],
    ["CORDON_LOG_LEVEL", "verbose", "one of fatal, error, warn, info, debug, trace, silent"],
    ["CORDON_DEBUG", "yes", "one of 1, 0, true, false"],
    ["CORDON_MODEL", "claude sonnet", "a model id without spaces"],
    ["CORDON_SANDBOX_MODE", "always", "one of off, non-main, all"],
    ["CORDON_SANDBOX_SCOPE", "global", "one of session, agent, shared"],
    ["CORDON_WORKSPACE_ACCESS", "write", "one of none, ro, rw"],
    ["CORDON_TOOLS_PROFILE", "all", "one of minimal, coding, full"],
    ["CORDON_SANDBOX_IMAGE", "My Image", "a Docker image reference"],
    ["CORDON_BASE_IMAGE", "debian:", "a Docker image reference"],
    ["ANTHROPIC_BASE_URL", "api.anthropic.com", "an http:// or https:// URL"],
    ["ANTHROPIC_BASE_URL", "ftp://gateway.local", "an http:// or https:// URL"],
  ])("%s=%j is refused, naming the value and what is accepted", (name, value, accepts) => {
    expect(failure({ [name]: value })).toContain(
      `${name}=${JSON.stringify(value)} is not valid: expected ${accepts}`,
    );
  });

  it("never prints a secret, only names the variable", () => {
    const key = "sk-ant-api03-abc def";
    for (const name of ["ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_API_KEYS"]) {
      const message = failure({ [name]: key });
      expect(message).toMatch(new RegExp(`^${name}=\\(value not shown\\) is not valid`));
      expect(message).not.toContain("abc");
    }
    expect(failure({ ANTHROPIC_API_KEYS: "sk-1,sk-2\nsk-3" })).toMatch(/ANTHROPIC_API_KEYS=/);
  });

  it("accepts what people set, and treats empty as unset", () => {
    expect(
      checkEnvironment({
        CORDON_HOME: "/var/lib/cordon",
        CORDON_CONFIG: "ci/cordon.json5",
        CORDON_LOG_LEVEL: "debug",
        CORDON_DEBUG: "true",
        CORDON_MODEL: "claude-sonnet-4-5-20250929",
        CORDON_SANDBOX_IMAGE: "ghcr.io/acme/sandbox:2026.11@sha256:" + "a".repeat(64),
        CORDON_BASE_IMAGE: "localhost:5000/debian_base:bookworm-slim",
        ANTHROPIC_API_KEY: "sk-ant-api03-Ab_9-x\n",
        ANTHROPIC_API_KEYS: "sk-1, sk-2,",
        ANTHROPIC_BASE_URL: "http://127.0.0.1:8080/anthropic",
        CORDON_SANDBOX_MODE: "",
      }),
    ).toEqual({ logLevel: "debug", debug: true });
    expect(checkEnvironment({})).toEqual({ logLevel: "info", debug: false });
  });

  it("covers every CORDON_* and ANTHROPIC_* variable the code reads, and the docs list them", () => {
    const names = new Set(environmentVariables.map((variable) => variable.name));
    const src = path.join(packageRoot(), "src");
    const read = new Set<string>();
    for (const file of readdirSync(src, { recursive: true, encoding: "utf8" })) {
      if (!file.endsWith(".ts") || file.endsWith(".test.ts")) continue;
      const text = readFileSync(path.join(src, file), "utf8");
      for (const match of text.matchAll(/env\??\.?\[\s*"((?:CORDON|ANTHROPIC)_[A-Z_]+)"\s*\]/g)) {
        read.add(match[1] ?? "");
      }
    }
    expect(read.size).toBeGreaterThan(5);
    for (const name of read) expect(names, `${name} is read but not checked`).toContain(name);
    const docs = readFileSync(path.join(packageRoot(), "docs", "configuration.md"), "utf8");
    for (const name of names) expect(docs, `${name} in docs/configuration.md`).toContain(name);
  });
});
