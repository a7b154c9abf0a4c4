import { describe, expect, it } from "vitest";

import { explainPlan } from "./explain.js";
import { plan, project, refusal, withDocker } from "./testing/plan-fixtures.js";

describe("project images in the plan", () => {
  it("resolves a Dockerfile inside the workspace, its directory the default context", () => {
    const result = plan(withDocker({ dockerfile: ".cordon/Dockerfile" }));
    expect(result.sandbox.spec?.docker.projectImage).toEqual({
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
    expect(built.sandbox.spec?.docker.projectImage).toMatchObject({
      context: project,
      args: { PY: "3.12" },
    });
    const devcontainer = plan(withDocker({ devcontainer: ".devcontainer/devcontainer.json" }));
    expect(devcontainer.sandbox.spec?.docker.projectImage).toEqual({
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
