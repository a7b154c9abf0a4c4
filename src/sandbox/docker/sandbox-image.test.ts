import { copyFile, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";

import { afterEach, beforeEach, describe, expect, it } from "vitest";

import { packageRoot } from "../../common/index.js";
import type { DockerEngine } from "./engine.js";
import { describeImageBuildEvent } from "./image-build-progress.js";
import { SandboxImage } from "./sandbox-image.js";

/** An engine that has one base image and no sandbox images. */
const engine = {
  images: {
    inspect: () => Promise.resolve({ id: "sha256:base", labels: {}, env: [] }),
    tags: () => Promise.resolve([]),
  },
} as unknown as DockerEngine;

describe("SandboxImage tag", () => {
  let directory: string;
  let dockerfilePath: string;
  let runtimePinsPath: string;

  beforeEach(async () => {
    directory = await mkdtemp(path.join(tmpdir(), "cordon-image-tag-"));
    dockerfilePath = path.join(directory, "sandbox.Dockerfile");
    runtimePinsPath = path.join(directory, "node-runtime.json");
    await copyFile(path.join(packageRoot(), "images", "sandbox.Dockerfile"), dockerfilePath);
    await copyFile(path.join(packageRoot(), "images", "node-runtime.json"), runtimePinsPath);
  });
  afterEach(() => rm(directory, { recursive: true, force: true }));

  const tag = async () =>
    (await new SandboxImage(engine, { baseImage: "base", dockerfilePath }).status()).tag;

  it("changes when the pinned Node.js package changes, not only the Dockerfile", async () => {
    const before = await tag();
    expect(before).toMatch(/^cordon-sandbox:[0-9a-f]{12}$/);
    expect(await tag()).toBe(before);

    const pins = JSON.parse(await readFile(runtimePinsPath, "utf8")) as {
      node: { version: string };
    };
    pins.node.version = "22.0.0";
    await writeFile(runtimePinsPath, JSON.stringify(pins));
    const afterPins = await tag();
    expect(afterPins).not.toBe(before);

    await writeFile(dockerfilePath, `${await readFile(dockerfilePath, "utf8")}\n# changed\n`);
    expect(await tag()).not.toBe(afterPins);
  });
});

describe("describeImageBuildEvent", () => {
  it("shows a build as one short line per Dockerfile step and no engine output", () => {
    const line = describeImageBuildEvent({
      type: "step",
      step: 6,
      total: 15,
      instruction: `RUN set -eu;     apt-get install -y ${"package ".repeat(40)}`,
    });
    expect(line).toMatch(/^\[6\/15\] RUN set -eu; apt-get install -y package/);
    expect(line!.length).toBeLessThanOrEqual(80);
  });
});
