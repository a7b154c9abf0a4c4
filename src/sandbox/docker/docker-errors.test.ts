import { describe, expect, it } from "vitest";

import { SandboxError } from "../../common/index.js";
import { engineStatusOf, toSandboxError } from "./docker-errors.js";

describe("engineStatusOf", () => {
  it("finds the engine's status through the errors that wrap it, and none where there is none", () => {
    const engine = Object.assign(new Error("container stopped/paused"), { statusCode: 409 });
    const fromClient = toSandboxError(engine, "start a command in abc");
    const fromCaller = new SandboxError("the sandbox is gone", { cause: fromClient });
    expect(engineStatusOf(engine)).toBe(409);
    expect(engineStatusOf(fromClient)).toBe(409);
    expect(engineStatusOf(fromCaller)).toBe(409);
    expect(engineStatusOf(new SandboxError("no engine involved"))).toBeUndefined();
    expect(engineStatusOf("not an error")).toBeUndefined();
  });
});
