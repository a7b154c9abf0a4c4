import net from "node:net";
import { PassThrough, type Duplex } from "node:stream";

import { describe, expect, it, vi } from "vitest";

import { ConfigError } from "../../common/index.js";
import { parsePortMapping, startPortForward } from "./port-forward.js";

describe("parsePortMapping", () => {
  it("reads [LOCAL:]REMOTE as kubectl port-forward does", () => {
    expect(parsePortMapping("3000")).toEqual({ localPort: 3000, remotePort: 3000 });
    expect(parsePortMapping("8080:3000")).toEqual({ localPort: 8080, remotePort: 3000 });
    expect(parsePortMapping(":3000")).toEqual({ localPort: 0, remotePort: 3000 });
    expect(parsePortMapping("0:3000")).toEqual({ localPort: 0, remotePort: 3000 });
  });

  it("refuses what is not a port, naming the form", () => {
    for (const text of ["", "0", "70000", "3000:", "a:3000", "1:2:3", "-1", "3000:0", "80:70000"]) {
      expect(() => parsePortMapping(text)).toThrow(ConfigError);
    }
    expect(() => parsePortMapping("web")).toThrow(/"web" is not a port mapping/);
  });
});

describe("startPortForward", () => {
  it("closes a client's connection the sandbox never answers, saying so, and drops a channel that comes late", async () => {
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout"] });
    const errors: unknown[] = [];
    let answer: ((channel: Duplex) => void) | undefined;
    const forward = await startPortForward({
      remotePort: 3000,
      connect: () => new Promise<Duplex>((resolve) => (answer = resolve)),
      onError: (error) => errors.push(error),
    });
    try {
      const client = net.connect(forward.localPort, "127.0.0.1");
      const closed = new Promise<void>((resolve) => client.once("close", () => resolve()));
      client.on("error", () => undefined);
      await vi.waitFor(() => expect(answer).toBeDefined());
      await vi.advanceTimersByTimeAsync(30_000);
      await closed;
      expect(errors).toEqual([
        expect.objectContaining({
          message: "the sandbox did not answer a connection to port 3000 within 30 s",
        }),
      ]);
      const late = new PassThrough();
      answer?.(late);
      await vi.waitFor(() => expect(late.destroyed).toBe(true));
    } finally {
      vi.useRealTimers();
      await forward.close();
    }
  });
});
