import { describe, expect, it } from "vitest";

import { parseDevcontainer } from "./devcontainer.js";

const file = "/work/app/.devcontainer/devcontainer.json";

describe("parseDevcontainer", () => {
  it("reads JSON with comments and trailing commas, resolving paths against its directory", () => {
    const parsed = parseDevcontainer(
      file,
      `// the team's container
      {
        "name": "app",
        "build": { "dockerfile": "Dockerfile", "context": "..", "args": { "V": "1" }, "target": "dev", },
        /* what tools see */
        "containerEnv": { "A": "1", "GONE": null },
        "remoteEnv": { "B": "2" },
        "remoteUser": "vscode",
        "postCreateCommand": "npm ci",
        "features": {},
      }`,
    );
    expect(parsed).toEqual({
      build: {
        dockerfile: "/work/app/.devcontainer/Dockerfile",
        context: "/work/app",
        args: { V: "1" },
        target: "dev",
      },
      env: { A: "1", B: "2" },
      user: { name: "vscode", key: "remoteUser" },
      ignored: ["features", "postCreateCommand"],
      droppedEnv: [],
    });
  });

  it("takes an image as it is, and the legacy dockerFile spelling with its own directory as context", () => {
    expect(parseDevcontainer(file, '{ "image": "cordon-sandbox:latest" }')).toMatchObject({
      image: "cordon-sandbox:latest",
      env: {},
      ignored: [],
    });
    expect(parseDevcontainer(file, '{ "dockerFile": "../Dockerfile" }').build).toEqual({
      dockerfile: "/work/app/Dockerfile",
      context: "/work/app/.devcontainer",
      args: {},
      target: undefined,
    });
  });

  it("leaves out environment values that would read the host (${localEnv:…} and friends)", () => {
    const parsed = parseDevcontainer(
      file,
      '{ "image": "x", "containerEnv": { "TOKEN": "${localEnv:GITHUB_TOKEN}", "DIR": "${containerWorkspaceFolder}/bin", "OK": "$literal" } }',
    );
    expect(parsed.env).toEqual({ OK: "$literal" });
    expect(parsed.droppedEnv).toEqual(["DIR", "TOKEN"]);
  });

  it("refuses what names no single image, Compose projects and text that is not JSON", () => {
    expect(() => parseDevcontainer(file, "{}")).toThrow(
      /exactly one of image and build.dockerfile \(it names neither\)/,
    );
    expect(() =>
      parseDevcontainer(file, '{ "image": "a", "build": { "dockerfile": "D" } }'),
    ).toThrow(/names both/);
    expect(() =>
      parseDevcontainer(file, '{ "dockerComposeFile": "compose.yml", "service": "app" }'),
    ).toThrow(/dockerComposeFile; cordon builds one image/);
    expect(() => parseDevcontainer(file, "{ image: ")).toThrow(/not valid JSON with comments/);
    expect(() => parseDevcontainer(file, '{ "image": 5 }')).toThrow(/image:/);
  });
});
