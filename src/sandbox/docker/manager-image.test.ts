import { describe, expect, it } from "vitest";

import { AbortedError, ImageError } from "../../common/index.js";
import type { DockerEngine } from "./engine.js";
import { ImageResolver } from "./manager-image.js";

/** An engine whose image inspects answer when the test says so, counting the calls. */
function fakeEngine() {
  const calls: string[] = [];
  let answer!: (result: { Id: string } | "absent") => void;
  const engine = {
    images: {
      inspect: (reference: string) => {
        calls.push(reference);
        return new Promise((resolve) => {
          // The image client's answer for a 404: no such image.
          answer = (result) =>
            resolve(result === "absent" ? undefined : { id: result.Id, labels: {}, env: [] });
        });
      },
    },
  } as unknown as DockerEngine;
  return {
    engine,
    calls,
    answer: (result: { Id: string } | "absent") => answer(result),
  };
}

const tick = () => new Promise((resolve) => setImmediate(resolve));

describe("ImageResolver", () => {
  it("looks an image up once for concurrent callers; one caller's abort stops only its wait", async () => {
    const { engine, calls, answer } = fakeEngine();
    const resolver = new ImageResolver({ engine });
    const controller = new AbortController();
    const first = resolver.resolve("img:1", { signal: controller.signal });
    const second = resolver.resolve("img:1");
    await tick();
    controller.abort();
    await expect(first).rejects.toThrow(AbortedError);
    answer({ Id: "sha256:abc" });
    expect(await second).toEqual({ reference: "img:1", id: "sha256:abc" });
    expect(calls).toEqual(["img:1"]);
    // Cached from now on.
    expect(await resolver.resolve("img:1")).toEqual({ reference: "img:1", id: "sha256:abc" });
    expect(calls).toHaveLength(1);
  });

  it("names the command for a missing configured image, and does not cache the failure", async () => {
    const { engine, calls, answer } = fakeEngine();
    const resolver = new ImageResolver({ engine });
    const missing = resolver.resolve("mine:2");
    await tick();
    answer("absent");
    const error = await missing.catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ImageError);
    expect((error as ImageError).fix).toContain("docker pull mine:2");
    const again = resolver.resolve("mine:2");
    await tick();
    answer({ Id: "sha256:def" });
    expect((await again).id).toBe("sha256:def");
    expect(calls).toEqual(["mine:2", "mine:2"]);
  });
});
