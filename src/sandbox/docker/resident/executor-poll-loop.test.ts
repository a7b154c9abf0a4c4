import { spawn, type ChildProcessWithoutNullStreams } from "node:child_process";

import { afterEach, describe, expect, it } from "vitest";

import { builtExecutorBinary } from "./testing/built-executor.js";
import { cStrings, encodeFrame, FrameReader, request, response, u32 } from "./protocol.js";

// Built now if its source changed; a missing or stale binary fails here, naming the fix.
const binary = await builtExecutorBinary();

/**
 * The executor's poll loop against raw frames, written in one piece so it handles them in one
 * round: what a slot's old occupant was ready for must never be applied to the new one.
 */
describe("the executor's poll loop", { timeout: 120_000 }, () => {
  let executor: ChildProcessWithoutNullStreams | undefined;
  afterEach(() => executor?.kill("SIGKILL"));

  it("a child whose slot and pipes were freed in the round a new child took them is not read for it (the loop never blocks on the new child's pipe)", async () => {
    const child = spawn(binary, [], { stdio: ["pipe", "pipe", "pipe"] });
    executor = child;
    const reader = new FrameReader();
    const waiting = new Map<string, () => void>();
    child.stdout.on("data", (chunk: Buffer) => {
      for (const frame of reader.push(chunk)) {
        // Every byte of output acknowledged at once: a flooding child's pipe stays polled.
        if (frame.type === response.stdout) {
          child.stdin.write(encodeFrame(request.ack, frame.id, u32(frame.length)));
        }
        waiting.get(`${frame.type}${frame.id}`)?.();
      }
    });
    /** Resolves true when a frame of `type` for `id` comes, false when none does for 20 s. */
    const next = (type: string, id: number) =>
      new Promise<boolean>((resolve) => {
        const timer = setTimeout(() => resolve(false), 20_000);
        waiting.set(`${type}${id}`, () => {
          clearTimeout(timer);
          waiting.delete(`${type}${id}`);
          resolve(true);
        });
      });
    const roundTrip = (id: number) => {
      const pong = next(response.pong, id);
      child.stdin.write(encodeFrame(request.ping, id));
      return pong;
    };
    const spawnFrame = (id: number, argv: string[], stdin: boolean) =>
      encodeFrame(
        request.spawn,
        id,
        u32(stdin ? 1 : 0),
        u32(argv.length),
        u32(0),
        cStrings(...argv, "/"),
      );

    const answered: boolean[] = [];
    for (let round = 0; round < 20; round += 1) {
      const flooding = 100 + 2 * round;
      const silent = flooding + 1;
      // The child exits at once and is reaped; the `yes` it left holds its stdout, which stays
      // readable and polled.
      const flowing = next(response.stdout, flooding);
      child.stdin.write(spawnFrame(flooding, ["sh", "-c", "yes &"], false));
      expect(await flowing).toBe(true);
      // One round trip more: the executor has reaped the `sh` by then (its SIGCHLD came first).
      expect(await roundTrip(6)).toBe(true);
      // Detach frees its slot and pipes; the next child takes both (first free slot, lowest
      // free descriptors) in the same round, and `cat` writes nothing until its stdin ends.
      child.stdin.write(
        Buffer.concat([encodeFrame(request.detach, flooding), spawnFrame(silent, ["cat"], true)]),
      );
      // The round that handles them may answer a ping sent with them, and only then block
      // reading `cat`'s empty stdout: a second ping, sent once the first is answered, is not.
      answered.push((await roundTrip(7)) && (await roundTrip(8)));
      if (!answered.at(-1)) break;
      const exited = next(response.exit, silent);
      child.stdin.write(encodeFrame(request.stdin, silent));
      expect(await exited).toBe(true);
    }
    expect(answered).not.toContain(false);
  });
});
