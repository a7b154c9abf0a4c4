import { describe, expect, it } from "vitest";

import { explainPlan } from "./explain.js";
import type { RunPlan } from "./plan-run.js";
import { plan, project, refusal, withDocker } from "./testing/plan-fixtures.js";

const projectImageOf = (result: RunPlan) => {
  const image = result.sandbox.spec?.docker.image;
  return image?.source === "project" ? image.project : undefined;
};

describe("project images in the plan", () => {
  it("resolves a Dockerfile inside the workspace, its directory the default context", () => {
    const result = plan(withDocker({ dockerfile: ".cordon/Dockerfile" }));
    expect(projectImageOf(result)).toEqual({
      source: "dockerfile",
      configKey: "agents.defaults.sandbox.docker.dockerfile",
      file: `${project}/.cordon/Dockerfile`,
      workspace: project,
      context: `${project}/.cordon`,
      args: {},
    });
    const text = explainPlan(result);
    expect(text).toContain(
      "image built from .cordon/Dockerfile with the context .cordon (agents.defaults.sandbox.docker.dockerfile)",
    );
    expect(text).toMatch(/image +project image cordon-project-<slug>:<hash>, built from /);
  });

  it("takes a context and build arguments, and a devcontainer.json; either changes the config hash", () => {
    const built = plan(
      withDocker({
        dockerfile: { file: "docker/ci.Dockerfile", context: ".", args: { PY: "3.12" } },
      }),
    );
    expect(projectImageOf(built)).toMatchObject({
      context: project,
      args: { PY: "3.12" },
    });
    const devcontainer = plan(withDocker({ devcontainer: ".devcontainer/devcontainer.json" }));
    expect(projectImageOf(devcontainer)).toEqual({
      source: "devcontainer",
      configKey: "agents.defaults.sandbox.docker.devcontainer",
      file: `${project}/.devcontainer/devcontainer.json`,
      workspace: project,
    });
    const plain = plan({});
    expect(new Set([built, devcontainer, plain].map((p) => p.sandbox.spec?.configHash)).size).toBe(
      3,
    );
  });

  it("refuses paths outside the workspace and two images at once", () => {
    expect(refusal(withDocker({ dockerfile: "../other/Dockerfile" })).message).toMatch(
      /agents\.defaults\.sandbox\.docker\.dockerfile: "\.\.\/other\/Dockerfile" leads outside the workspace/,
    );
    expect(refusal(withDocker({ devcontainer: "/etc/devcontainer.json" })).message).toMatch(
      /must be relative to the workspace/,
    );
    expect(
      refusal(withDocker({ dockerfile: { file: "Dockerfile", context: "../.." } })).message,
    ).toMatch(/"\.\.\/\.\." leads outside the workspace/);
    expect(refusal(withDocker({ dockerfile: "Dockerfile", image: "python:3.12" })).message).toMatch(
      /set one of .*docker\.image and .*docker\.dockerfile, not both/,
    );
    expect(
      refusal(withDocker({ dockerfile: "Dockerfile", devcontainer: ".devcontainer.json" })).message,
    ).toMatch(/set one of .*docker\.dockerfile and .*docker\.devcontainer, not both/);
  });
});

describe("the one image decision (sandbox.docker.image | project | runtime | built-in)", () => {
  it("takes the config's image, else the project's, else the runtime's, else the built-in one", () => {
    const runtime = { runtime: "claude-code" as const };
    expect(plan(withDocker({ image: "mine:1" }), runtime).sandbox.spec?.docker.image).toEqual({
      source: "config",
      reference: "mine:1",
      configKey: "agents.defaults.sandbox.docker.image",
    });
    expect(
      plan(withDocker({ dockerfile: "Dockerfile" }), runtime).sandbox.spec?.docker.image.source,
    ).toBe("project");
    expect(plan({}, runtime).sandbox.spec?.docker.image).toEqual({
      source: "runtime",
      runtime: "claude-code",
    });
    expect(plan({}).sandbox.spec?.docker.image).toEqual({ source: "builtin" });
    expect(explainPlan(plan({}, runtime))).toMatch(
      /image +claude-code agent image cordon-agent-claude-code:<hash>, built when missing/,
    );
  });

  // The image's source changed no hash (f01cfe62ac4f0844, 9026de6c8188eb19 then); initUser did on
  // purpose: a container made before runs its init and keep-alive as the agent, and is replaced.
  it("keeps the config hashes cordon had before the image named its source: an upgrade finds no container stale", () => {
    expect(plan({}).sandbox.spec?.configHash).toBe("c78571b6ac8d0442");
    const dockerfile = withDocker({ dockerfile: { file: "docker/Dockerfile", args: { A: "1" } } });
    expect(plan(dockerfile).sandbox.spec?.configHash).toBe("7d0a94c69b512fb2");
  });
});
