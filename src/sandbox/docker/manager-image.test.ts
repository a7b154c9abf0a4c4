import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";

import { describe, expect, it } from "vitest";

import { AbortedError, ImageError } from "../../common/index.js";
import type { DockerEngine } from "./engine.js";
import { fakeEngine as fakeDockerEngine } from "./client/testing/fake-engine.js";
import { ImageResolver } from "./manager-image.js";
import { localBaseImage } from "./sandbox-image.js";

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

describe("ImageResolver.lookupFor", () => {
  /** The fake engine, with its builds and pulls counted (it makes neither). */
  function engineThatCounts() {
    const fake = fakeDockerEngine();
    const asked: string[] = [];
    fake.engine.images.build = (_context, request) => {
      asked.push(`build ${request.tag}`);
      return Promise.reject(new Error("the fake engine builds no images"));
    };
    fake.engine.images.pull = (reference) => {
      asked.push(`pull ${reference}`);
      return Promise.reject(new Error("the fake engine pulls no images"));
    };
    fake.images.set(localBaseImage, { id: "sha256:base", labels: {}, env: [] });
    return { ...fake, asked };
  }
  const user = "1000:1000";

  it("gives a built-in or agent image that is on the engine, and names the command for one that is not, building nothing", async () => {
    const { engine, images, asked } = engineThatCounts();
    const resolver = new ImageResolver({ engine });
    const builtin = { image: { source: "builtin" as const }, user };
    const agent = { image: { source: "runtime" as const, runtime: "claude-code" as const }, user };

    const noBuiltin = await resolver.lookupFor(builtin).catch((e: unknown) => e);
    expect(noBuiltin).toBeInstanceOf(ImageError);
    expect((noBuiltin as ImageError).message).toMatch(
      /^the sandbox image cordon-sandbox:[0-9a-f]{12} is not on the Docker engine$/,
    );
    expect((noBuiltin as ImageError).fix).toBe("run `cordon image build`");
    const noAgent = await resolver.lookupFor(agent).catch((e: unknown) => e);
    expect((noAgent as ImageError).message).toMatch(
      /^the claude-code agent image cordon-agent-claude-code:\S+ is not on the Docker engine$/,
    );
    expect((noAgent as ImageError).fix).toBe("run `cordon image build --agent claude-code`");

    // Once they are there, the lookup finds them (not cached as missing).
    const sandboxTag = /cordon-sandbox:[0-9a-f]{12}/.exec((noBuiltin as Error).message)![0];
    const agentTag = /cordon-agent-claude-code:\S+/.exec((noAgent as Error).message)![0];
    images.set(sandboxTag, { id: "sha256:sandbox", labels: {}, env: [] });
    images.set(agentTag, { id: "sha256:agent", labels: {}, env: [] });
    expect(await resolver.lookupFor(builtin)).toEqual({
      reference: sandboxTag,
      id: "sha256:sandbox",
    });
    expect(await resolver.lookupFor(agent)).toEqual({ reference: agentTag, id: "sha256:agent" });
    expect(asked).toEqual([]);
  });

  it("finds a project image only once built: a missing one or a missing base is an ImageError, never a build or a pull", async () => {
    const { engine, images, asked } = engineThatCounts();
    const workspace = await mkdtemp(path.join(tmpdir(), "cordon-lookup-project-"));
    try {
      const file = path.join(workspace, "Dockerfile");
      const project = () => ({
        image: {
          source: "project" as const,
          project: {
            source: "dockerfile" as const,
            configKey: "sandbox.docker.dockerfile",
            file,
            workspace,
          },
        },
        user,
      });
      const resolver = new ImageResolver({ engine, stateDirectory: workspace });

      await writeFile(file, "FROM cordon-sandbox:latest\nRUN true\n");
      const noBase = await resolver.lookupFor(project()).catch((e: unknown) => e);
      expect(noBase).toBeInstanceOf(ImageError);
      expect((noBase as ImageError).message).toBe(
        "the base image cordon-sandbox:latest of Dockerfile is not on the Docker engine",
      );

      images.set("cordon-sandbox:latest", { id: "sha256:latest", labels: {}, env: [] });
      const notBuilt = await resolver.lookupFor(project()).catch((e: unknown) => e);
      expect(notBuilt).toBeInstanceOf(ImageError);
      expect((notBuilt as ImageError).message).toMatch(
        /^the project image cordon-project-\S+:[0-9a-f]{12} \(from Dockerfile\) is not built$/,
      );
      expect((notBuilt as ImageError).fix).toMatch(/a run or `cordon exec` .*builds it/);
      expect(asked).toEqual([]);
    } finally {
      await rm(workspace, { recursive: true, force: true });
    }
  });
});
