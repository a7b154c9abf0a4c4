import { Writable } from "node:stream";

import { describe, expect, it } from "vitest";

import { createLogger } from "./logger.js";

function capture(): { lines: () => Record<string, unknown>[]; stream: Writable } {
  const chunks: string[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _encoding, callback) {
      chunks.push(chunk.toString("utf8"));
      callback();
    },
  });
  return {
    stream,
    lines: () =>
      chunks
        .join("")
        .split("\n")
        .filter(Boolean)
        .map((line) => JSON.parse(line) as Record<string, unknown>),
  };
}

describe("logger", () => {
  it("writes JSON lines and redacts secrets wherever they travel", () => {
    const out = capture();
    const logger = createLogger({ destination: out.stream, level: "debug" });
    logger.info(
      {
        apiKey: "sk-ant-secret",
        request: { headers: { authorization: "Bearer abc", "x-api-key": "k" } },
        sandbox: { env: { TOKEN: "t" } },
        model: "claude",
      },
      "calling model",
    );
    const [line] = out.lines();
    const text = JSON.stringify(line);
    expect(line?.["msg"]).toBe("calling model");
    expect(line?.["model"]).toBe("claude");
    expect(text).not.toContain("sk-ant-secret");
    expect(text).not.toContain("Bearer abc");
    expect(text).not.toContain('"t"');
    expect(line?.["apiKey"]).toBe("[redacted]");
  });

  it("binds context in child loggers and honours the level", () => {
    const out = capture();
    const logger = createLogger({ destination: out.stream, level: "info" });
    const child = logger.child({ runId: "r1", sessionKey: "agent:main:main" });
    child.debug("hidden");
    child.info("shown");
    const lines = out.lines();
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({ runId: "r1", sessionKey: "agent:main:main", msg: "shown" });
  });
});
