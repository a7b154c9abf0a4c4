import { describe, expect, it } from "vitest";

import { cStrings, encodeFrame, FrameReader, payloadOf, u32, u64 } from "./protocol.js";

describe("resident executor frames", () => {
  it("encodes type, id and length before the payload parts", () => {
    const frame = encodeFrame("S", 7, u32(1), cStrings("bash", "-c"));
    expect([...frame.subarray(0, 9)]).toEqual([0x53, 0, 0, 0, 7, 0, 0, 0, 12]);
    expect(frame.subarray(9).toString("latin1")).toBe("\0\0\0\x01bash\0-c\0");
    expect([...u64(2 ** 40 + 1)]).toEqual([0, 0, 1, 0, 0, 0, 0, 1]);
  });

  it("reads frames split anywhere, several in one chunk, and a large one in many pieces", () => {
    const big = Buffer.alloc(70_000, 0x78);
    const stream = Buffer.concat([
      encodeFrame("O", 1, Buffer.from("hello")),
      encodeFrame("X", 1, u32(0)),
      encodeFrame("O", 2, big),
      encodeFrame("U", 3),
    ]);
    for (const pieceBytes of [1, 7, 9, 4096, stream.byteLength]) {
      const reader = new FrameReader();
      const frames = [];
      for (let at = 0; at < stream.byteLength; at += pieceBytes) {
        frames.push(...reader.push(stream.subarray(at, at + pieceBytes)));
      }
      expect(frames.map((frame) => [frame.type, frame.id, payloadOf(frame).byteLength])).toEqual([
        ["O", 1, 5],
        ["X", 1, 4],
        ["O", 2, big.byteLength],
        ["U", 3, 0],
      ]);
      expect(frames[0] && payloadOf(frames[0]).toString()).toBe("hello");
      expect(frames[2] && payloadOf(frames[2]).equals(big)).toBe(true);
      // Pieces are views of the chunks, none empty: a payload that came in one chunk is one piece.
      expect(frames.every((frame) => frame.parts.every((part) => part.byteLength > 0))).toBe(true);
      if (pieceBytes === stream.byteLength) expect(frames[2]?.parts).toHaveLength(1);
    }
  });
});
