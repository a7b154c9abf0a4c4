import { describe, expect, it } from "vitest";

import { dockerfileBaseImages } from "./dockerfile-bases.js";

describe("dockerfileBaseImages", () => {
  it("lists each external FROM once, with global ARGs and build arguments substituted", () => {
    const dockerfile = [
      "# syntax comment",
      "ARG BASE=cordon-sandbox:latest",
      "ARG PY_VERSION",
      "FROM --platform=linux/amd64 python:${PY_VERSION:-3.12}-slim AS build",
      "RUN pip wheel .",
      "FROM $BASE",
      "COPY --from=build /wheels /wheels",
      "FROM build AS again",
      "FROM scratch",
      "FROM \\",
      "  cordon-sandbox:latest",
    ].join("\n");
    expect(dockerfileBaseImages(dockerfile, {})).toEqual([
      "python:3.12-slim",
      "cordon-sandbox:latest",
    ]);
    expect(
      dockerfileBaseImages(dockerfile, { PY_VERSION: "3.11", BASE: "debian:bookworm" }),
    ).toEqual(["python:3.11-slim", "debian:bookworm", "cordon-sandbox:latest"]);
  });
});
