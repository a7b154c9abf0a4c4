import { createWriteStream } from "node:fs";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { Readable } from "node:stream";

import { afterEach, beforeEach, describe, expect, it } from "vitest";

import { ImageError } from "../../common/index.js";
import type { ImageBuildStreamEvent, ImageClient } from "./client/index.js";
import { describeImageBuildEvent } from "./image-build-progress.js";
import { buildImageLogged } from "./image-build-stream.js";
import type { ImageBuildEvent } from "./sandbox-image.js";

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(path.join(tmpdir(), "cordon-build-stream-"));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** An engine that replays a build's events, each at a time on a fake clock. */
function replaying(
  events: { atMs: number; event: ImageBuildStreamEvent }[],
  clock: { ms: number },
) {
  return {
    build: async (
      _context: Readable,
      _request: unknown,
      onEvent: (e: ImageBuildStreamEvent) => void,
    ) => {
      for (const { atMs, event } of events) {
        clock.ms = atMs;
        onEvent(event);
      }
      await Promise.resolve();
    },
  } as unknown as ImageClient;
}

async function build(events: { atMs: number; event: ImageBuildStreamEvent }[]) {
  const clock = { ms: 0 };
  const log = createWriteStream(path.join(dir, "build.log"));
  const emitted: ImageBuildEvent[] = [];
  const outcome = await buildImageLogged(
    replaying(events, clock),
    Readable.from([]),
    { tag: "t" },
    {
      log,
      emit: (event) => emitted.push(event),
      what: "the project image",
      fix: "fix the Dockerfile",
      now: () => clock.ms,
    },
  ).then(
    () => undefined,
    (error: unknown) => error,
  );
  await new Promise((resolve) => log.end(resolve));
  return { emitted, outcome, log: await readFile(path.join(dir, "build.log"), "utf8") };
}

describe("following an image build", () => {
  it("says when each step started, and a long step's latest line every few seconds", async () => {
    const { emitted } = await build([
      { atMs: 0, event: { stream: "Step 1/2 : FROM debian\n" } },
      { atMs: 1_000, event: { stream: "Step 2/2 : RUN apt-get install -y cmake\n" } },
      { atMs: 2_000, event: { stream: "Get:1 http://deb.debian.org bookworm InRelease\n" } },
      { atMs: 7_500, event: { stream: "Unpacking cmake (3.25.1-1) ...\n" } },
      { atMs: 8_000, event: { stream: "Setting up cmake (3.25.1-1) ...\n" } },
      { atMs: 13_000, event: { stream: "Processing triggers for man-db\n" } },
    ]);
    const lines = emitted.map((event) => describeImageBuildEvent(event));
    expect(lines).toEqual([
      "[1/2 0.0s] FROM debian",
      "[2/2 1.0s] RUN apt-get install -y cmake",
      "    7.5s Unpacking cmake (3.25.1-1) ...",
      "    13.0s Processing triggers for man-db",
    ]);
  });

  it("quotes the failed step's last lines and the log, not only the engine's exit code", async () => {
    const { outcome, log } = await build([
      { atMs: 0, event: { stream: "Step 1/1 : RUN ./configure\n" } },
      { atMs: 10, event: { stream: "checking for gcc... gcc\n" } },
      { atMs: 20, event: { stream: "./configure: line 3: /opt/tool: Permission denied\n" } },
      {
        atMs: 30,
        event: { error: "The command '/bin/sh -c ./configure' returned a non-zero code: 126" },
      },
    ]);
    expect(outcome).toBeInstanceOf(ImageError);
    const error = outcome as ImageError;
    expect(error.message).toContain("returned a non-zero code: 126");
    expect(error.message).toContain(
      "the step's last lines:\n    checking for gcc... gcc\n    ./configure: line 3: /opt/tool: Permission denied",
    );
    expect(error.message).toContain(`full log: ${path.join(dir, "build.log")}`);
    expect(error.fix).toBe("fix the Dockerfile");
    expect(log).toContain("Permission denied");
  });
});
