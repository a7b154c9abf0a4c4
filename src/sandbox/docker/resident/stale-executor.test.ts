import { chmod, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";

import { afterAll, beforeAll, describe, expect, it } from "vitest";

import { createSilentLogger } from "../../../common/index.js";
import { encodeFrame, protocolGreeting, response } from "./protocol.js";
import { ResidentConnection } from "./resident-connection.js";
import { assertSpeaksThisProtocol } from "./testing/built-executor.js";
import { localExecutor } from "./testing/local-executor.js";

/**
 * A binary built from an older executor.c greets with an older protocol: the tests that run the
 * executor and cordon itself say it is stale and how to rebuild, rather than failing somewhere
 * later with no word of why.
 */
describe("a stale executor binary", () => {
  let directory: string;
  let stale: string;
  const older = protocolGreeting.replace(/\d+$/, (n) => String(Number(n) - 1));

  beforeAll(async () => {
    directory = await mkdtemp(path.join(tmpdir(), "cordon-stale-executor-"));
    stale = path.join(directory, "cordon-executor");
    // What an older build says first (its hello frame), then it waits for frames as one would.
    const hello = encodeFrame(response.hello, 1, Buffer.from(older));
    const octal = [...hello].map((byte) => `\\${byte.toString(8).padStart(3, "0")}`).join("");
    await writeFile(stale, `#!/bin/sh\nprintf '${octal}'\nexec cat >/dev/null\n`);
    await chmod(stale, 0o755);
  });
  afterAll(async () => {
    await rm(directory, { recursive: true, force: true });
  });

  it("fails the executor's tests naming the rebuild", async () => {
    await expect(assertSpeaksThisProtocol(stale)).rejects.toThrow(
      `greets with "${older}", this source with "${protocolGreeting}": it is stale; run \`bash scripts/build-executor.sh\``,
    );
  });

  it("is named stale by cordon when it will not start", async () => {
    await expect(
      ResidentConnection.open(localExecutor(stale), createSilentLogger()),
    ).rejects.toThrow(
      `it speaks "${older}", this cordon "${protocolGreeting}": the binary is stale`,
    );
  });
});
