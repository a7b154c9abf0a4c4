/**
 * cordon as a user installs it: the project packed with `npm pack` (whose `prepare` builds it),
 * the tarball installed into a temporary global prefix with npm, and the installed `cordon` run
 * from there, with no clone beside it.
 */
import { execFile } from "node:child_process";
import { mkdir, mkdtemp, readFile, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { promisify } from "node:util";

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

import { packageRoot } from "../../src/common/index.js";
import { demoRepo, git } from "../support/demo-repo.js";
import { requireSandboxImage } from "../support/docker.js";
import { removeStateDirectory } from "../support/state-directory.js";

const run = promisify(execFile);
const minutes = 60_000;

interface Installed {
  exitCode: number;
  stdout: string;
  stderr: string;
}

describe("the packed and installed package", () => {
  let root: string;
  let tarball: string;
  let prefix: string;
  let home: string;
  let repo: string;

  /** The installed `cordon`, as a shell would find it on PATH. */
  /** The environment of a shell whose PATH has the prefix's bin (a global install). */
  const userEnv = (): Record<string, string> => ({
    PATH: `${path.join(prefix, "bin")}${path.delimiter}${process.env["PATH"] ?? ""}`,
    HOME: process.env["HOME"] ?? "",
    CORDON_HOME: home,
  });

  async function cordon(args: string[], nodeOptions: string[] = []): Promise<Installed> {
    const bin = path.join(prefix, "lib", "node_modules", "cordon", "dist", "cli", "main.js");
    const command = nodeOptions.length ? process.execPath : path.join(prefix, "bin", "cordon");
    const argv = nodeOptions.length ? [...nodeOptions, bin, ...args] : args;
    try {
      const { stdout, stderr } = await run(command, argv, { cwd: repo, env: userEnv() });
      return { exitCode: 0, stdout, stderr };
    } catch (error) {
      const failed = error as { code: number; stdout: string; stderr: string };
      return { exitCode: failed.code, stdout: failed.stdout, stderr: failed.stderr };
    }
  }

  beforeAll(async () => {
    root = await mkdtemp(path.join(tmpdir(), "cordon-package-"));
    home = path.join(root, "home");
    prefix = path.join(root, "prefix");
    // A copy of the project's files as a clone has them (no dist/), so packing builds it there
    // and never rewrites the dist/ other tests run.
    const project = path.join(root, "project");
    await mkdir(project);
    await run("bash", [
      "-c",
      'git -C "$0" ls-files -z -co --exclude-standard | tar -C "$0" --null -cf - -T - | tar -C "$1" -xf -',
      packageRoot(),
      project,
    ]);
    await symlink(path.join(packageRoot(), "node_modules"), path.join(project, "node_modules"));
    const packed = await run("npm", ["pack", "--json", "--pack-destination", root], {
      cwd: project,
      maxBuffer: 64 * 1024 * 1024,
    });
    const [manifest] = JSON.parse(packed.stdout) as [{ filename: string }];
    tarball = path.join(root, manifest.filename);
    // The registry is reachable; the cache (warm from the project's own install) makes it fast.
    await run(
      "npm",
      ["install", "-g", "--prefix", prefix, "--prefer-offline", "--no-audit", "--no-fund", tarball],
      { cwd: root },
    );
    repo = await demoRepo();
  }, 10 * minutes);

  afterAll(async () => {
    // The MCP case's sandbox, whatever became of the case.
    if (prefix) await cordon(["sandbox", "rm", "--all", "--discard-changes"]);
    await removeStateDirectory(home);
    await rm(root, { recursive: true, force: true });
    await rm(repo, { recursive: true, force: true });
  });

  it("ships the built CLI, the image's Dockerfile, the guides and the examples they name, and no maps, build info or test code", async () => {
    const { stdout } = await run("tar", ["-tzf", tarball]);
    const files = stdout.split("\n").filter(Boolean);
    expect(files).toEqual(
      expect.arrayContaining([
        "package/dist/cli/main.js",
        "package/dist/index.d.ts",
        "package/images/sandbox.Dockerfile",
        // The bash programs sent into sandboxes, beside the modules that send them.
        "package/dist/sandbox/shell/exec-wrapper.sh",
        "package/dist/sandbox/shell/process-script.sh",
        "package/dist/sandbox/docker/files/file-script.sh",
        "package/docs/configuration.md",
        // configuration.md names the ready-made configs; the demo's script drives a scripted run.
        "package/examples/config/single-agent.json5",
        "package/examples/demo/script.json",
      ]),
    );
    const unwanted = files.filter((file) =>
      /\.map$|tsbuildinfo|\/testing\/|\.test\.|^package\/(src|test|scripts|bench)\//.test(file),
    );
    expect(unwanted).toEqual([]);
  });

  it("runs from the prefix: its version, a run's explanation and a help topic", async () => {
    const { version } = JSON.parse(
      await readFile(path.join(packageRoot(), "package.json"), "utf8"),
    ) as { version: string };
    expect(await cordon(["--version"])).toMatchObject({ exitCode: 0, stdout: `${version}\n` });

    const explain = await cordon(["sandbox", "explain"]);
    expect(explain.stderr).toBe("");
    expect(explain.exitCode).toBe(0);
    expect(explain.stdout).toMatch(/^sandbox\s+yes/m);
    expect(explain.stdout).toContain(`workspace ${repo}`);

    const topic = await cordon(["help", "scripted-model"]);
    expect(topic.exitCode).toBe(0);
    expect(topic.stdout).toMatch(/^# The scripted model/);
  });

  it("serves MCP: --print-config names the installed cordon, and a client's session is reviewed with cordon diff", async () => {
    await requireSandboxImage();
    const printed = await cordon(["mcp", "--print-config", "claude", "--session", "packed"]);
    expect(printed.exitCode, printed.stderr).toBe(0);
    const config = JSON.parse(printed.stdout) as {
      mcpServers: { cordon: { command: string; args: string[] } };
    };
    // On PATH as `cordon`, so the config says just that, as `claude mcp add` would.
    expect(config.mcpServers.cordon).toMatchObject({
      command: "cordon",
      args: ["mcp", "--session", "packed"],
    });
    expect(printed.stderr).toContain("--disallowedTools Bash,");

    // A client starts the server exactly as the config says, from the user's PATH.
    const client = new Client({ name: "packed-test", version: "1" });
    await client.connect(
      new StdioClientTransport({
        command: config.mcpServers.cordon.command,
        args: config.mcpServers.cordon.args,
        cwd: repo,
        env: userEnv(),
        stderr: "ignore",
      }),
    );
    try {
      const names = (await client.listTools()).tools.map((tool) => tool.name);
      expect(names).toEqual(expect.arrayContaining(["exec", "write", "explain", "diff"]));
      const wrote = (await client.callTool({
        name: "write",
        arguments: { path: "from-package.txt", content: "packed and served\n" },
      })) as CallToolResult;
      expect(wrote.isError).toBeFalsy();
      const listed = (await client.callTool({
        name: "exec",
        arguments: { command: "cat from-package.txt" },
      })) as CallToolResult;
      const [block] = listed.content;
      expect(block?.type === "text" ? block.text : "").toContain("packed and served");
    } finally {
      await client.close();
    }
    // The session is let go when the client leaves; the person reviews, the repo is untouched.
    let review: Installed | undefined;
    for (let attempt = 0; attempt < 60; attempt += 1) {
      review = await cordon(["diff", "--session", "packed"]);
      if (review.exitCode === 0) break;
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
    expect(review?.stdout, review?.stderr).toContain("+packed and served");
    expect(git(repo, "status", "--porcelain")).toBe("");
  });

  it("answers --version and --help without loading Docker, the model SDK or the config schema", async () => {
    // A module resolve hook logs every module the process loads.
    const log = path.join(root, "loaded.log");
    const hooks = path.join(root, "log-hooks.mjs");
    await writeFile(
      hooks,
      `import { appendFileSync } from "node:fs";
export async function resolve(specifier, context, next) {
  const resolved = await next(specifier, context);
  appendFileSync(${JSON.stringify(log)}, resolved.url + "\\n");
  return resolved;
}
`,
    );
    const register = `data:text/javascript,import { register } from "node:module"; register(${JSON.stringify(pathToFileURL(hooks).href)});`;
    const loadedBy = async (args: string[]): Promise<string> => {
      await rm(log, { force: true });
      expect((await cordon(args, ["--import", register])).exitCode).toBe(0);
      return readFile(log, "utf8");
    };
    const heavy = /node_modules\/(dockerode|@anthropic-ai\/sdk|zod)\//;
    for (const args of [["--version"], ["--help"]]) {
      const loaded = await loadedBy(args);
      expect(loaded).toMatch(/node_modules\/commander\//);
      expect(loaded).not.toMatch(heavy);
    }
    // The hook sees them where a command needs them.
    expect(await loadedBy(["sandbox", "explain"])).toMatch(heavy);
  });

  it("type-checks an embedder's code against the published types with skipLibCheck off", async () => {
    // A project that depends on the installed package (its own dependencies came with it) and
    // checks every .d.ts it reaches: no dockerode or other type a consumer cannot resolve.
    const consumer = path.join(root, "consumer");
    await mkdir(path.join(consumer, "node_modules"), { recursive: true });
    const installed = path.join(prefix, "lib", "node_modules", "cordon");
    await symlink(installed, path.join(consumer, "node_modules", "cordon"));
    // The docs' custom tool needs zod, as an embedder's own dependency would give it.
    await symlink(
      path.join(installed, "node_modules", "zod"),
      path.join(consumer, "node_modules", "zod"),
    );
    await writeFile(path.join(consumer, "package.json"), '{ "type": "module" }\n');
    await writeFile(
      path.join(consumer, "tsconfig.json"),
      JSON.stringify({
        compilerOptions: {
          strict: true,
          skipLibCheck: false,
          module: "nodenext",
          moduleResolution: "nodenext",
          target: "es2023",
          noEmit: true,
          // @types/node from cordon's own install: a consumer on Node has it.
          typeRoots: [path.join(packageRoot(), "node_modules", "@types")],
          types: ["node"],
        },
        files: ["embed.ts"],
      }),
    );
    await writeFile(
      path.join(consumer, "embed.ts"),
      `import { createRunner, createSandbox, defineTool, fixTests, textResult, type RunResult } from "cordon";
import { z } from "zod";

// docs/library.md's custom tool: a tool reaches files through sandbox.files.
const countLines = defineTool({
  name: "count_lines",
  description: "Counts the lines of a file in the workspace.",
  inputSchema: z.object({ path: z.string() }),
  async execute({ path }, { sandbox, signal }) {
    const bytes = await sandbox.files.readFile(path, { signal });
    return textResult(String(new TextDecoder().decode(bytes).split("\\n").length));
  },
});

export async function embed(): Promise<RunResult> {
  await using box = await createSandbox({ workspace: "/tmp/repo", remove: true });
  await box.sandbox.files.writeFile("notes.txt", "hello\\n");
  const listing = await box.sandbox.exec("ls", { timeoutMs: 10_000 });
  console.log(listing.stdout, box.plan.sandbox.mode, typeof fixTests);
  return createRunner({ cwd: "/tmp/repo", tools: [countLines] }).run({ prompt: "hi" });
}
`,
    );
    const tsc = path.join(packageRoot(), "node_modules", "typescript", "bin", "tsc");
    const checked = await run(process.execPath, [tsc, "-p", consumer]).then(
      () => ({ code: 0, stdout: "" }),
      (error: { code: number; stdout: string }) => ({ code: error.code, stdout: error.stdout }),
    );
    expect(checked.stdout).toBe("");
    expect(checked.code).toBe(0);
  });
});
