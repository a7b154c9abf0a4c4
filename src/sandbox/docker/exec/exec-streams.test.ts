import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";

import { describe, expect, it } from "vitest";

import { ChunkChannel } from "../../shell/chunk-channel.js";
import { DemuxStream } from "./demux-stream.js";

function frame(stream: 1 | 2, text: string): Buffer {
  const payload = Buffer.from(text);
  const header = Buffer.alloc(8);
  header[0] = stream;
  header.writeUInt32BE(payload.byteLength, 4);
  return Buffer.concat([header, payload]);
}

describe("DemuxStream", () => {
  it("splits frames into stdout and stderr, across any chunk boundaries", async () => {
    const wire = Buffer.concat([
      frame(1, "out-1 "),
      frame(2, "err-1"),
      frame(1, ""),
      frame(1, "out-2"),
    ]);
    // Every possible split of the wire into three chunks gives the same bytes in the same order;
    // a payload cut by a chunk boundary arrives in pieces (views of the chunks, never empty).
    for (let a = 1; a < wire.byteLength - 1; a += 3) {
      for (let b = a + 1; b < wire.byteLength; b += 5) {
        const seen: Array<[string, string]> = [];
        await pipeline(
          Readable.from([wire.subarray(0, a), wire.subarray(a, b), wire.subarray(b)]),
          new DemuxStream((stream, chunk) => {
            expect(chunk.byteLength).toBeGreaterThan(0);
            const last = seen.at(-1);
            const text = Buffer.from(chunk).toString();
            if (last?.[0] === stream) last[1] += text;
            else seen.push([stream, text]);
          }),
        );
        expect(seen).toEqual([
          ["stdout", "out-1 "],
          ["stderr", "err-1"],
          ["stdout", "out-2"],
        ]);
      }
    }
  });

  it("waits for a slow handler before taking more (backpressure)", async () => {
    const order: string[] = [];
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const done = pipeline(
      Readable.from([frame(1, "a"), frame(1, "b")]),
      new DemuxStream(async (_stream, chunk) => {
        const text = Buffer.from(chunk).toString();
        order.push(`start ${text}`);
        if (text === "a") await gate;
        order.push(`end ${text}`);
      }),
    );
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(order).toEqual(["start a"]);
    release();
    await done;
    expect(order).toEqual(["start a", "end a", "start b", "end b"]);
  });
});

describe("ChunkChannel", () => {
  it("hands chunks over one at a time; a write resolves once the reader took it", async () => {
    const channel = new ChunkChannel();
    let taken = false;
    const write = channel.write(Buffer.from("x")).then(() => (taken = true));
    await new Promise((resolve) => setTimeout(resolve, 10));
    expect(taken).toBe(false);
    const reader = channel[Symbol.asyncIterator]();
    expect(Buffer.from((await reader.next()).value as Uint8Array).toString()).toBe("x");
    const next = reader.next();
    await write;
    expect(taken).toBe(true);
    channel.close();
    expect((await next).done).toBe(true);
  });

  it("releases a waiting writer when closed, and refuses writes after", async () => {
    const channel = new ChunkChannel();
    const pending = channel.write(Buffer.from("never read"));
    channel.close();
    await expect(pending).resolves.toBeUndefined();
    await expect(channel.write(Buffer.from("late"))).rejects.toThrow(/closed/);
  });
});
