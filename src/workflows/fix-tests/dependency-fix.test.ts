import { describe, expect, it } from "vitest";

import { dependencyFix } from "./dependency-fix.js";
import { classifyEnvironmentError, projectNamesOf } from "./environment-errors.js";

const names = (...files: string[]) => projectNamesOf(files.join("\n"));

describe("dependencyFix names what the project uses", () => {
  it.each([
    [
      ["package.json", "pnpm-lock.yaml"],
      'pnpm install --frozen-lockfile" --setup-allow-host registry.npmjs.org',
      "pnpm must be in the image",
    ],
    [["package.json", "yarn.lock"], "yarn install --frozen-lockfile", "yarn must be in the image"],
    [["package.json", "yarn.lock", ".yarnrc.yml"], "yarn install --immutable", "corepack enable"],
    [["package.json", "bun.lockb"], "bun install --frozen-lockfile", "bun must be in the image"],
    [
      ["package.json", "package-lock.json"],
      '"npm ci" --setup-allow-host registry.npmjs.org',
      "--carry node_modules",
    ],
  ])("node, %j: %s", (files, install, also) => {
    const fix = dependencyFix({ projectNames: names(...files), ecosystem: "node" });
    expect(fix).toContain(install);
    expect(fix).toContain(also);
  });

  it("npm ci is not offered to a pnpm project", () => {
    expect(dependencyFix({ projectNames: names("package.json", "pnpm-lock.yaml") })).not.toMatch(
      /npm ci/,
    );
  });

  it("a Python module: pip for the project's packaging, and the Debian package in a two-line project image", () => {
    const fix = dependencyFix({
      projectNames: names("pyproject.toml", "rates.py"),
      ecosystem: "python",
      module: "yaml",
    });
    expect(fix).toContain('--setup-cmd "pip install ." --setup-allow-host pypi.org');
    expect(fix).toContain("--carry .venv");
    expect(fix).toContain("apt-get install -y --no-install-recommends python3-yaml");
    expect(fix).toContain("FROM cordon-sandbox:latest");
    expect(
      dependencyFix({
        projectNames: names("requirements.txt"),
        ecosystem: "python",
        module: "dateutil.parser",
      }),
    ).toMatch(/pip install -r requirements\.txt.*python3-dateutil/);
  });

  it("a Go module gets go mod download with the proxy hosts", () => {
    expect(dependencyFix({ projectNames: names("go.mod", "calc") })).toContain(
      '--setup-cmd "go mod download" --setup-allow-host proxy.golang.org --setup-allow-host sum.golang.org',
    );
  });

  it("a project of several kinds, or none known, gets the general fix", () => {
    const general = dependencyFix({ projectNames: names("package.json", "pyproject.toml") });
    expect(general).toMatch(/--carry node_modules.*--carry \.venv.*npm ci.*pip install/);
    expect(dependencyFix({ projectNames: names("Makefile") })).toBe(general);
  });
});

describe("environment errors carry the project's fix", () => {
  const classify = (output: string, ...files: string[]) =>
    classifyEnvironmentError({
      exitCode: 1,
      output,
      network: "none",
      projectNames: names(...files),
    });

  it("a missing command in a pnpm project names pnpm", () => {
    const found = classify("sh: 1: vitest: not found", "package.json", "pnpm-lock.yaml");
    expect(found?.fix).toContain("pnpm install --frozen-lockfile");
  });

  it("go test that cannot download a module names go mod download", () => {
    // go 1.19 under --network none, a dependency missing from the module cache (captured).
    const output = [
      "go: downloading github.com/google/go-cmp v0.5.9",
      'x.go:2:8: github.com/google/go-cmp@v0.5.9: Get "https://proxy.golang.org/github.com/google/go-cmp/@v/v0.5.9.zip": dial tcp: lookup proxy.golang.org on 10.255.255.53:53: dial udp 10.255.255.53:53: connect: network is unreachable',
    ].join("\n");
    expect(classify(output, "go.mod")).toMatchObject({
      kind: "no_network",
      fix: expect.stringContaining('--setup-cmd "go mod download"') as unknown,
    });
    // Go's resolver asking a loopback server that is not there.
    const refused =
      'go: github.com/google/go-cmp@v0.5.9: Get "https://proxy.golang.org/github.com/google/go-cmp/@v/v0.5.9.mod": dial tcp: lookup proxy.golang.org on [::1]:53: read udp [::1]:52084->[::1]:53: read: connection refused';
    expect(classify(refused, "go.mod")).toMatchObject({
      kind: "no_network",
      problem:
        "the tests tried to reach the network (lookup proxy.golang.org), and this sandbox has none",
    });
    const offline =
      'go: github.com/google/go-cmp@v0.5.9: Get "https://proxy.golang.org/github.com/google/go-cmp/@v/v0.5.9.mod": dial tcp: lookup proxy.golang.org: Temporary failure in name resolution\n';
    expect(classify(offline, "go.mod")).toMatchObject({
      kind: "no_network",
      fix: expect.stringContaining('--setup-cmd "go mod download"') as unknown,
    });
  });
});

describe("a fix that sends the user to an image", () => {
  /** What follows "use an image that has it/them": the keys it names. */
  const imageWords = (text: string, what: "it" | "them") =>
    new RegExp(`use an image that has ${what} (\\([^)]*\\))`).exec(text)?.[1];

  it("says it in the same words for missing dependencies and for a missing command", () => {
    const dependencies = dependencyFix({ projectNames: names("package.json") });
    const command = classifyEnvironmentError({
      exitCode: 127,
      output: "bash: line 1: frobnicate: command not found",
      network: "none",
      projectNames: names(),
    });
    expect(imageWords(dependencies, "them")).toContain("FROM cordon-sandbox:latest");
    expect(imageWords(command?.fix ?? "", "it")).toBe(imageWords(dependencies, "them"));
  });
});
