/**
 * Project images (issue 13 item 2, docs/images.md), against the real engine and Debian's mirror:
 *
 * - a pytest project that imports PyYAML, which cordon's image lacks, names `.cordon/Dockerfile`
 *   (FROM cordon's image, one `apt-get install python3-yaml` layer) in the user's own config:
 *   `cordon fix-tests` builds it, the scripted agent's fix is verified (exit 0); the next command
 *   builds nothing; a changed Dockerfile builds a new image and a new container runs from it;
 * - a devcontainer.json with build.dockerfile, a context of the repository, a build argument,
 *   containerEnv, and fields a sandbox ignores (noted once), one of which asks for the host's
 *   environment (not passed);
 * - images that cannot be a sandbox (no git, no bash) fail the preflight: exit 3 and the fix;
 * - the attacks: a repository whose own cordon.json5 names its Dockerfile gets no build until the
 *   user trusts it; a build context with links to a host file and to /etc and a hostile
 *   .dockerignore sends no host file to the engine.
 */
import { spawnSync } from "node:child_process";
import { cp, mkdir, mkdtemp, readFile, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";

import { afterAll, beforeAll, describe, expect, it } from "vitest";

import { packageRoot } from "../../src/common/index.js";
import { DockerEngine, SandboxImage } from "../../src/sandbox/index.js";
import { fixture, git } from "../support/demo-repo.js";
import { dockerClient, requireSandboxImage } from "../support/docker.js";
import { runCordon } from "../support/run-cli.js";
import { removeStateDirectory } from "../support/state-directory.js";

const cli = path.join(packageRoot(), "dist", "cli", "main.js");

interface ResultJson {
  status: string;
  exitCode: number;
  message: string;
  verification?: { exitCode: number };
}

describe("project images", () => {
  const runId = `${process.pid}`;
  let root: string;
  let home: string;
  /** Every image repository a test here may have created, removed at the end. */
  const repositories = new Set<string>();
  const env = (): NodeJS.ProcessEnv => ({
    CORDON_HOME: home,
    CORDON_CONFIG: "",
    ANTHROPIC_API_KEY: "",
  });

  /** A git repository in the test's root, from fixture directories copied over each other. */
  async function repository(name: string, ...sources: [string, string][]): Promise<string> {
    // A name of this run's own: its images are cordon-project-<name>:…, apart from any other run's.
    const repo = path.join(root, `${name}-${runId}`);
    for (const [source, target] of sources) {
      await cp(source, path.join(repo, target), { recursive: true });
    }
    git(repo, "init", "-q");
    git(repo, "add", "-A");
    git(repo, "commit", "-qm", "initial");
    repositories.add(`cordon-project-${path.basename(repo)}`);
    return repo;
  }

  /** The user's own config (named with --config, so trusted) asking for a project image. */
  async function config(name: string, docker: Record<string, unknown>): Promise<string> {
    const file = path.join(root, `${name}.json5`);
    await writeFile(file, JSON.stringify({ agents: { defaults: { sandbox: { docker } } } }));
    return file;
  }

  async function projectImages(repo: string): Promise<string[]> {
    const images = await dockerClient().listImages({
      filters: { reference: [`cordon-project-${path.basename(repo)}`] },
    });
    return images.flatMap((image) => image.RepoTags ?? []).sort();
  }

  beforeAll(async () => {
    await requireSandboxImage();
    root = await mkdtemp(path.join(tmpdir(), "cordon-project-image-"));
    home = path.join(root, "home");
  });

  afterAll(async () => {
    const docker = dockerClient();
    const containers = await docker.listContainers({ all: true });
    await Promise.all(
      containers
        .filter((info) => (info.Labels["cordon.home"] ?? "") === home)
        .map((info) =>
          docker
            .getContainer(info.Id)
            .remove({ force: true })
            .catch(() => undefined),
        ),
    );
    const images = await docker.listImages({ filters: { reference: [...repositories] } });
    await Promise.all(
      images
        .flatMap((image) => image.RepoTags ?? [])
        .map((tag) =>
          // The engine sometimes never answers an image removal under load; a leftover tag is
          // harmless (its name carries this run's pid), a hook that never ends is not.
          Promise.race([
            docker
              .getImage(tag)
              .remove()
              .catch(() => undefined),
            new Promise((resolve) => setTimeout(resolve, 60_000).unref()),
          ]),
        ),
    );
    await removeStateDirectory(home);
    await rm(root, { recursive: true, force: true });
  }, 600_000);

  it("fix-tests builds .cordon/Dockerfile once, fixes with its tool, and rebuilds on a change", async () => {
    const repo = await repository(
      "rates-yaml",
      [fixture("fix-tests", "rates-pytest"), "."],
      [fixture("project-image", "cordon"), ".cordon"],
    );
    const trusted = await config("rates-yaml", { dockerfile: ".cordon/Dockerfile" });
    const out = path.join(root, "out-rates");
    const run = await runCordon(
      [
        "fix-tests",
        "--workspace",
        repo,
        "--config",
        trusted,
        "--test-cmd",
        "python3 -m pytest -q",
        "--model-script",
        fixture("fix-tests", "fixes-rates.json"),
        "--out",
        out,
      ],
      env(),
    );
    const result = JSON.parse(await readFile(path.join(out, "result.json"), "utf8")) as ResultJson;
    expect(result.status, `${result.message}\n${run.stderr}`).toBe("fixed");
    expect(run.exitCode).toBe(0);
    expect(run.stderr).toContain("building the project image from .cordon/Dockerfile");
    expect(run.stderr).toMatch(/\[\d\/\d \d+\.\ds\] RUN apt-get update/);
    // One progress line per step; apt's own output is in the log only.
    expect(run.stderr).not.toContain("Unpacking python3-yaml");
    const log = /full log: (\S+)\)/.exec(run.stderr)?.[1];
    expect(await readFile(log!, "utf8")).toContain("python3-yaml");
    const [built, ...others] = await projectImages(repo);
    expect(others).toEqual([]);
    expect(built).toMatch(/^cordon-project-rates-yaml-\d+:[0-9a-f]{12}$/);

    // The next command finds the image current: nothing is built, the sandbox has the module.
    const again = await runCordon(
      [
        "exec",
        "--workspace",
        repo,
        "--config",
        trusted,
        "--",
        "python3",
        "-c",
        "import yaml; print('yaml', yaml.__version__)",
      ],
      env(),
    );
    expect(again.exitCode, again.stderr).toBe(0);
    expect(again.stdout).toMatch(/^yaml \d/);
    expect(again.stderr).not.toContain("building");
    expect(await projectImages(repo)).toEqual([built]);
    const list = await runCordon(["sandbox", "list"], env());
    expect(list.stdout).toContain(built);

    // A changed Dockerfile is a new image, and the sandbox is recreated from it.
    const dockerfile = path.join(repo, ".cordon", "Dockerfile");
    await writeFile(dockerfile, `${await readFile(dockerfile, "utf8")}ENV RATES_IMAGE=2\n`);
    const changed = await runCordon(
      [
        "exec",
        "--workspace",
        repo,
        "--config",
        trusted,
        "--",
        "sh",
        "-c",
        'echo "image $RATES_IMAGE"; python3 -c "import yaml"',
      ],
      env(),
    );
    expect(changed.exitCode, changed.stderr).toBe(0);
    expect(changed.stderr).toContain("building the project image");
    expect(changed.stdout, changed.stderr).toContain("image 2");
    const rebuilt = (await projectImages(repo)).filter((tag) => tag !== built);
    expect(rebuilt).toHaveLength(1);
    expect((await runCordon(["sandbox", "list"], env())).stdout).toContain(rebuilt[0]);
  }, 600_000);

  it("a devcontainer.json with build.dockerfile: its context, arguments and containerEnv; the rest noted", async () => {
    const repo = await repository(
      "rates-devcontainer",
      [fixture("fix-tests", "rates-pytest"), "."],
      [fixture("project-image", "devcontainer"), ".devcontainer"],
      [fixture("project-image", "devcontainer-tools"), "tools"],
    );
    const trusted = await config("rates-devcontainer", {
      devcontainer: ".devcontainer/devcontainer.json",
    });
    const run = await runCordon(
      [
        "exec",
        "--workspace",
        repo,
        "--config",
        trusted,
        "--",
        "sh",
        "-c",
        'command -v rates-check; echo "currency=$RATES_CURRENCY host-home=${HOST_HOME-unset}"',
      ],
      env(),
    );
    expect(run.exitCode, run.stderr).toBe(0);
    expect(run.stdout).toContain("/opt/rates/bin/rates-check");
    expect(run.stdout).toContain("currency=EUR host-home=unset");
    expect(run.stderr).toContain(
      ".devcontainer/devcontainer.json: customizations, forwardPorts, postCreateCommand are ignored",
    );
    expect(run.stderr).toMatch(/HOST_HOME uses \$\{…\} variables and was left out/);
    // remoteUser "sandbox" is uid 1000 in the image, the sandbox's own user: nothing to say.
    expect(run.stderr).not.toContain("remoteUser");
  }, 300_000);

  it("an image without git or without bash fails the preflight: exit 3 and the fix", async () => {
    const { baseImage } = await new SandboxImage(new DockerEngine()).status();
    const repo = await repository("rates-broken", [fixture("fix-tests", "rates-pytest"), "."]);
    await mkdir(path.join(repo, "images"));
    // The plain Debian base cordon's image is built from: no git.
    await writeFile(path.join(repo, "images", "no-git.Dockerfile"), `FROM ${baseImage}\n`);
    await writeFile(
      path.join(repo, "images", "no-bash.Dockerfile"),
      "FROM cordon-sandbox:latest\nUSER root\nRUN rm /usr/bin/bash\n",
    );

    const noGit = await runCordon(
      [
        "fix-tests",
        "--workspace",
        repo,
        "--config",
        await config("no-git", { dockerfile: "images/no-git.Dockerfile" }),
        "--test-cmd",
        "python3 -m pytest -q",
        "--model-script",
        fixture("fix-tests", "no-turns.json"),
        "--out",
        path.join(root, "out-no-git"),
      ],
      env(),
    );
    // fix-tests prints its result on stdout, the fix on stderr.
    expect(noGit.exitCode, noGit.stderr).toBe(3);
    expect(noGit.stdout).toMatch(
      /the project image cordon-project-rates-broken-\d+:\w+, built from images\/no-git\.Dockerfile \(agents\.defaults\.sandbox\.docker\.dockerfile\), cannot run a sandbox: it has no git/,
    );
    expect(noGit.stderr).toMatch(/fix: start the Dockerfile FROM cordon-sandbox:latest/);

    const noBash = await runCordon(
      [
        "exec",
        "--workspace",
        repo,
        "--config",
        await config("no-bash", { dockerfile: "images/no-bash.Dockerfile" }),
        "--",
        "true",
      ],
      env(),
    );
    expect(noBash.exitCode, noBash.stderr).toBe(3);
    expect(noBash.stderr).toMatch(/cannot run a sandbox: it has no bash for uid 1000:1000/);
    expect(noBash.stderr).toMatch(/apt-get install -y --no-install-recommends bash/);
  }, 300_000);

  it("a repository's own cordon.json5 naming its Dockerfile gets no build until trusted", async () => {
    const repo = await repository("hostile-build", [fixture("fix-tests", "rates-pytest"), "."]);
    await mkdir(path.join(repo, ".cordon"));
    // What the repository would run on the user's machine, with network, if cordon built it.
    await writeFile(
      path.join(repo, ".cordon", "Dockerfile"),
      "FROM cordon-sandbox:latest\nRUN echo exfiltrate > /tmp/ran\n",
    );
    await writeFile(
      path.join(repo, "cordon.json5"),
      '{ agents: { defaults: { sandbox: { docker: { dockerfile: ".cordon/Dockerfile" } } } } }\n',
    );
    for (const args of [
      ["exec", "--", "true"],
      [
        "fix-tests",
        "--test-cmd",
        "python3 -m pytest -q",
        "--model-script",
        fixture("fix-tests", "no-turns.json"),
      ],
    ]) {
      const result = spawnSync(process.execPath, [cli, ...args], {
        cwd: repo,
        env: { PATH: process.env["PATH"], HOME: process.env["HOME"], CORDON_HOME: home },
        encoding: "utf8",
        timeout: 120_000,
      });
      // exec says it on stderr; fix-tests prints its result (this refusal) on stdout.
      const output = `${result.stdout}${result.stderr}`;
      expect(result.status, output).toBe(2);
      expect(output).toContain('agents.defaults.sandbox.docker.dockerfile: ".cordon/Dockerfile"');
      expect(output).toContain("cordon config trust ./cordon.json5");
    }
    expect(await projectImages(repo)).toEqual([]);

    // The user reads it and trusts it: now it builds (so the check above could see a build).
    const cordon = (args: string[]) =>
      spawnSync(process.execPath, [cli, ...args], {
        cwd: repo,
        env: { PATH: process.env["PATH"], HOME: process.env["HOME"], CORDON_HOME: home },
        encoding: "utf8",
        timeout: 120_000,
      });
    expect(cordon(["config", "trust"]).status).toBe(0);
    const trusted = cordon(["exec", "--", "true"]);
    expect(trusted.status, trusted.stderr).toBe(0);
    expect(await projectImages(repo)).toHaveLength(1);
  }, 300_000);

  it("a build context's links and a hostile .dockerignore send no host file to the engine", async () => {
    const secret = path.join(root, "host-secret.txt");
    await writeFile(secret, "HOST-SECRET-7f3a\n");
    const repo = await repository("hostile-context", [fixture("fix-tests", "rates-pytest"), "."]);
    const context = path.join(repo, ".cordon");
    await mkdir(context);
    await symlink(secret, path.join(context, "absolute-link"));
    await symlink(path.relative(context, secret), path.join(context, "relative-link"));
    await symlink("/etc", path.join(context, "etc"));
    // Patterns that name what lies outside, and re-include everything.
    await writeFile(
      path.join(context, ".dockerignore"),
      `*\n!*\n!../host-secret.txt\n!${secret}\n!etc/**\n`,
    );
    await writeFile(
      path.join(context, "Dockerfile"),
      [
        "FROM cordon-sandbox:latest",
        "COPY . /context/",
        "USER root",
        // Whatever reached the engine, and whatever the links lead to inside the build.
        "RUN (cat /context/absolute-link /context/relative-link /context/etc/hostname; find /context) > /seen 2>&1; true",
        "",
      ].join("\n"),
    );
    const trusted = await config("hostile-context", { dockerfile: ".cordon/Dockerfile" });
    const run = await runCordon(
      [
        "exec",
        "--workspace",
        repo,
        "--config",
        trusted,
        "--",
        "sh",
        "-c",
        "cat /seen; ls -la /context; grep -rs HOST-SECRET /context /seen || echo no-secret",
      ],
      env(),
    );
    expect(run.exitCode, run.stderr).toBe(0);
    expect(run.stdout).not.toContain("HOST-SECRET-7f3a");
    expect(run.stdout).toContain("no-secret");
    // The links arrived as links (their text), pointing at nothing in the image.
    expect(run.stdout).toMatch(/absolute-link -> .*host-secret\.txt/);
    // The build log saw no secret either.
    const log = /full log: (\S+)\)/.exec(run.stderr)?.[1];
    expect(await readFile(log!, "utf8")).not.toContain("HOST-SECRET-7f3a");
  }, 300_000);
});
