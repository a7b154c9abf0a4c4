import { describe, expect, it } from "vitest";

import {
  AbortedError,
  ConfigError,
  CordonError,
  DockerUnavailableError,
  ExitCode,
  FileOperationError,
  SandboxError,
  exitCodeOf,
  messageOf,
} from "./errors.js";

describe("the error tree", () => {
  it("maps each kind of failure to its exit code (DESIGN.md §7)", () => {
    expect(exitCodeOf(new ConfigError("bad"))).toBe(ExitCode.usage);
    expect(exitCodeOf(new DockerUnavailableError("down"))).toBe(ExitCode.sandbox);
    expect(exitCodeOf(new AbortedError("stop"))).toBe(130);
    expect(exitCodeOf(new Error("bug"))).toBe(ExitCode.internal);
    expect(exitCodeOf("thrown string")).toBe(ExitCode.internal);
    // A state directory cordon cannot write is the machine's state: exit 3, with its remedy.
    const unwritable = Object.assign(new Error("EACCES: permission denied, mkdir '/srv/c'"), {
      code: "EACCES",
      path: "/srv/c",
    });
    expect(exitCodeOf(unwritable)).toBe(ExitCode.sandbox);
  });

  it("keeps the fix, the cause and a literal code", () => {
    const cause = new Error("ECONNREFUSED");
    const error = new DockerUnavailableError("no engine", { fix: "start Docker", cause });
    expect(error.fix).toBe("start Docker");
    expect(error.cause).toBe(cause);
    expect(error.code).toBe("docker_unavailable");
    expect(error.name).toBe("DockerUnavailableError");
    expect(error).toBeInstanceOf(SandboxError);
  });

  it("recognises cordon errors without instanceof, and nothing else", () => {
    expect(CordonError.is(new ConfigError("x"))).toBe(true);
    expect(CordonError.is(new Error("x"))).toBe(false);
    expect(CordonError.is({ code: "config_invalid" })).toBe(false);
    expect(CordonError.is(null)).toBe(false);
  });

  it("carries the reason and path of a failed file operation", () => {
    const error = new FileOperationError("read-only", "read_only", "/agent/a.txt");
    expect(error.reason).toBe("read_only");
    expect(error.path).toBe("/agent/a.txt");
    expect(messageOf(error)).toBe("read-only");
    expect(messageOf(42)).toBe("42");
  });
});
