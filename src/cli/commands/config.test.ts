import {
  lstat,
  mkdir,
  mkdtemp,
  readFile,
  realpath,
  rm,
  symlink,
  writeFile,
} from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";

import { Command } from "commander";
import JSON5 from "json5";
import { afterEach, beforeEach, describe, expect, it } from "vitest";

import { ExitCode, createLogger } from "../../common/index.js";
import type { ConfigSource } from "../../config/index.js";
import type { RunPlan } from "../../policy/index.js";
import { createRunner } from "../../runner/index.js";
import type { CliContext } from "../context.js";
import { loadCliConfig, planFromConfig } from "../plan-context.js";
import { plain } from "../render/colors.js";
import { runCli } from "../run-cli.js";
import { sandboxCommand } from "./sandbox-command.js";
import type { ValidationReport } from "./config.js";

let dir: string;
let stateDir: string;
let configFile: string;

beforeEach(async () => {
  dir = await mkdtemp(path.join(tmpdir(), "cordon-cli-config-"));
  stateDir = path.join(dir, "state");
  await mkdir(path.join(dir, "repo"));
  configFile = path.join(dir, "cordon.json5");
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function cordon(args: string[], env: Record<string, string> = {}) {
  let out = "";
  let err = "";
  const code = await runCli(
    ["node", "cordon", ...args],
    { CORDON_HOME: stateDir, CORDON_LOG_LEVEL: "silent", ...env },
    { stdout: (t) => (out += t), stderr: (t) => (err += t) },
  );
  return { code, out, err };
}

const opsConfig = `{
  // an ops agent keeps one container; triage only reads
  tools: { deny: ["process"] },
  agents: {
    defaults: { workspace: "./repo" },
    list: [
      { id: "ops", default: true, sandbox: { scope: "agent" } },
      { id: "triage", tools: { profile: "minimal" }, sandbox: { workspaceAccess: "ro" } },
    ],
  },
}`;

describe("cordon config validate", () => {
  it("plans every agent and reports ok with exit 0", async () => {
    await writeFile(configFile, opsConfig);
    const result = await cordon(["config", "validate", "--config", configFile]);
    expect(result.err).toBe("");
    expect(result.code).toBe(0);
    expect(result.out).toMatch(
      new RegExp(`^ok: ${configFile} \\(named with --config; trusted\\)\n`),
    );
    expect(result.out).toMatch(
      /agent ops: agent:ops:main sandboxed \(cordon-[a-z0-9-]+-agent-ops-[0-9a-f]{12}\)/,
    );
    expect(result.out).toMatch(/agent triage: .*tools read, ls, find, grep/);
    expect(result.out).not.toMatch(/does not exist/);
  });

  it("warns about a workspace that does not exist", async () => {
    await writeFile(configFile, `{ agents: { defaults: { workspace: "./missing" } } }`);
    const result = await cordon(["config", "validate", "--config", configFile]);
    expect(result.code).toBe(0);
    expect(result.out).toContain(`! main: the workspace ${dir}/missing does not exist (yet)`);
  });

  it("prints every schema problem with its path and the fix, and exits 2", async () => {
    await writeFile(
      configFile,
      `{ tools: { profile: "all" }, agents: { defaults: { sandbox: { scope: "global", nework: "none" } } } }`,
    );
    const result = await cordon(["config", "validate", "--config", configFile]);
    expect(result.code).toBe(ExitCode.usage);
    expect(result.out).toBe("");
    expect(result.err).toContain(`cordon: ${configFile} has 3 problems:`);
    expect(result.err).toContain('  tools.profile: expected one of "minimal", "coding", "full"');
    expect(result.err).toContain(
      '  agents.defaults.sandbox.scope: expected one of "session", "agent", "shared"',
    );
    expect(result.err).toContain('  agents.defaults.sandbox: unknown key "nework"');
    expect(result.err).toMatch(/ {2}fix: .*cordon config schema/);
  });

  it("reports what the sandbox rules refuse, including binds through symlinks", async () => {
    // repo/keys is inside the bind root as written, but a symlink to a directory outside it.
    await mkdir(path.join(dir, "secret"));
    await symlink(path.join(dir, "secret"), path.join(dir, "repo", "keys"));
    await writeFile(
      configFile,
      JSON.stringify({
        agents: {
          defaults: {
            workspace: "./repo",
            sandbox: {
              docker: {
                binds: [`${dir}/repo/keys:/keys`, "/etc:/host-etc"],
                bindRoots: [`${dir}/repo`],
                env: { GITHUB_TOKEN: "x" },
              },
            },
          },
        },
      }),
    );
    const result = await cordon(["config", "validate", "--config", configFile, "--json"]);
    expect(result.code).toBe(ExitCode.usage);
    const report = JSON.parse(result.out) as ValidationReport;
    expect(report.ok).toBe(false);
    expect(report.issues.map((i) => i.path)).toEqual([
      "agents.defaults.sandbox.docker.env.GITHUB_TOKEN",
      "agents.defaults.sandbox.docker.binds[0]",
      "agents.defaults.sandbox.docker.binds[1]",
    ]);
    expect(report.issues[1]?.message).toMatch(
      /resolves to .*\/secret\) is outside the allowed bind roots/,
    );
    expect(report.issues[2]?.message).toMatch(/\/etc is \/etc, a system directory/);
  });

  it("reports an empty tool set with the keys that cause it", async () => {
    await writeFile(
      configFile,
      `{ agents: { defaults: { workspace: "./repo" } }, tools: { allow: ["read"], deny: ["read"] } }`,
    );
    const result = await cordon(["config", "validate", "--config", configFile]);
    expect(result.code).toBe(ExitCode.usage);
    expect(result.err).toMatch(/agent "main": no tool is allowed .*tools\.deny/);
  });

  it("--json reports schema problems as data", async () => {
    await writeFile(configFile, `{ model: 5 }`);
    const result = await cordon(["config", "validate", "--config", configFile, "--json"]);
    expect(result.code).toBe(ExitCode.usage);
    const report = JSON.parse(result.out) as ValidationReport;
    expect(report).toMatchObject({ ok: false, issues: [{ path: "model" }] });
  });

  it("names a missing --config file", async () => {
    const result = await cordon(["config", "validate", "--config", path.join(dir, "nope.json5")]);
    expect(result.code).toBe(ExitCode.usage);
    expect(result.err).toMatch(/nope\.json5 \(from --config\) does not exist/);
  });
});

describe("cordon config schema and show", () => {
  it("prints the JSON Schema", async () => {
    const result = await cordon(["config", "schema"]);
    expect(result.code).toBe(0);
    const schema = JSON.parse(result.out) as { properties: Record<string, unknown> };
    expect(Object.keys(schema.properties)).toContain("agents");
  });

  it("shows the user's own config under the project's file, and what each sets", async () => {
    await writeFile(configFile, opsConfig);
    const userDir = path.join(dir, "xdg", "cordon");
    await mkdir(userDir, { recursive: true });
    await writeFile(
      path.join(userDir, "config.json5"),
      `{ agents: { defaults: { sandbox: { disk: "unlimited" } } } }`,
    );
    const shown = await cordon(["config", "show", "--config", configFile], {
      XDG_CONFIG_HOME: path.join(dir, "xdg"),
    });
    expect(shown.code).toBe(0);
    expect(shown.out.split("\n")[0]).toBe(
      `// config from ${configFile} (named with --config; trusted) under ${path.join(userDir, "config.json5")} (your user config; trusted)`,
    );
    expect(JSON5.parse<Record<string, unknown>>(shown.out)).toMatchObject({
      tools: { deny: ["process"] },
      agents: { defaults: { sandbox: { disk: "unlimited" } } },
    });
  });

  it("shows what the file and environment set, and with --resolved every default", async () => {
    await writeFile(configFile, opsConfig);
    const shown = await cordon(["config", "show", "--config", configFile], {
      CORDON_MODEL: "claude-test",
    });
    expect(shown.code).toBe(0);
    expect(shown.out.split("\n")[0]).toBe(
      `// config from ${configFile} (named with --config; trusted)`,
    );
    const explicit = JSON5.parse<Record<string, unknown>>(shown.out);
    expect(explicit).toMatchObject({
      tools: { deny: ["process"] },
      agents: {
        defaults: { workspace: path.join(dir, "repo"), model: { primary: "claude-test" } },
      },
    });
    expect(JSON.stringify(explicit)).not.toContain("pidsLimit");

    const resolved = await cordon([
      "config",
      "show",
      "--resolved",
      "--json",
      "--config",
      configFile,
    ]);
    const config = JSON.parse(resolved.out) as {
      agents: { defaults: { sandbox: { mode: string; docker: { pidsLimit: number } } } };
    };
    expect(config.agents.defaults.sandbox.mode).toBe("all");
    expect(config.agents.defaults.sandbox.docker.pidsLimit).toBe(256);
  });
});

describe("cordon sandbox explain", () => {
  function contextFor(env: NodeJS.ProcessEnv): CliContext {
    return {
      env,
      logger: createLogger({ level: "silent" }),
      stdout: () => undefined,
      stderr: () => undefined,
      paint: { stdout: plain, stderr: plain },
      outputShared: false,
      readStdin: () => Promise.resolve(""),
      exitCode: ExitCode.success,
    };
  }

  it("--json prints exactly the plan the runner plans for a run", async () => {
    await writeFile(configFile, opsConfig);
    const result = await cordon([
      "sandbox",
      "explain",
      "--config",
      configFile,
      "--agent",
      "triage",
      "--session",
      "t1",
      "--json",
    ]);
    expect(result.code).toBe(0);
    const {
      config: source,
      forwards,
      ...printed
    } = JSON.parse(result.out) as RunPlan & {
      config: ConfigSource | null;
      forwards: unknown[];
    };
    expect(source).toMatchObject({ file: configFile, origin: "--config", trusted: true });
    // Beside the plan, the port forwards into its container listening now: none here.
    expect(forwards).toEqual([]);

    const runner = createRunner({ env: { CORDON_HOME: stateDir }, configPath: configFile });
    const plan = await runner.plan({ agentId: "triage", sessionKey: "t1" });
    expect(printed).toEqual(JSON.parse(JSON.stringify(plan)));
    // planFromConfig (used by config validate) makes the same plan.
    const context = contextFor({ CORDON_HOME: stateDir });
    const { config } = await loadCliConfig(context, { configPath: configFile });
    expect(planFromConfig(context, config, { agentId: "triage", sessionKey: "t1" })).toEqual(plan);
    expect(printed.sandbox.spec?.mounts.map((m) => [m.target, m.readOnly])).toEqual([
      ["/workspace", false],
      ["/agent", true],
    ]);
    expect(printed.sandbox.spec?.privateWorkspace).toMatch(new RegExp(`^${stateDir}/workspaces/`));
  });

  it("explains in text: decision, container, mounts, tools with their keys", async () => {
    await writeFile(configFile, opsConfig);
    const result = await cordon([
      "sandbox",
      "explain",
      "--config",
      configFile,
      "--session",
      "deploy",
    ]);
    expect(result.code).toBe(0);
    expect(result.out).toContain("agent     ops");
    expect(result.out).toContain("session   agent:ops:deploy");
    expect(result.out).toMatch(/scope "agent" \(agents\.list\[0\]\.sandbox\.scope\)/);
    expect(result.out).toMatch(/deny {2}process +global +tools\.deny/);
  });

  it("exits 2 for an unknown agent and 7 when the policy leaves no tool", async () => {
    await writeFile(configFile, opsConfig);
    const unknown = await cordon(["sandbox", "explain", "--config", configFile, "--agent", "nope"]);
    expect(unknown.code).toBe(ExitCode.usage);
    expect(unknown.err).toMatch(/no agent "nope" in the config \(agents: ops, triage\)/);

    await writeFile(configFile, `{ tools: { allow: ["grep"], deny: ["g*"] } }`);
    const empty = await cordon(["sandbox", "explain", "--config", configFile]);
    expect(empty.code).toBe(ExitCode.policy);
    expect(empty.err).toMatch(/no tool is allowed/);
  });

  it("shares one sandbox parent command between files that register subcommands", () => {
    const program = new Command("cordon");
    const first = sandboxCommand(program);
    first.command("list");
    expect(sandboxCommand(program)).toBe(first);
    expect(program.commands.filter((c) => c.name() === "sandbox")).toHaveLength(1);
  });
});

describe("cordon config trust and untrust", () => {
  it("prints the real path, the sha256 and what the file loosens; --json as data", async () => {
    await writeFile(
      configFile,
      `{ agents: { defaults: { sandbox: { docker: { network: "bridge" } } } } }`,
    );
    const trusted = await cordon(["config", "trust", configFile]);
    expect(trusted.code, trusted.err).toBe(0);
    expect(trusted.out).toContain(`trusted ${await realpath(configFile)}\n  sha256 `);
    expect(trusted.out).toContain('    agents.defaults.sandbox.docker.network: "bridge" — ');
    expect(trusted.out).toContain("any edit makes it untrusted again");

    const json = await cordon(["config", "trust", configFile, "--json"]);
    const report = JSON.parse(json.out) as { path: string; sha256: string; loosens: unknown[] };
    expect(report.sha256).toMatch(/^[0-9a-f]{64}$/);
    expect(report.loosens).toEqual([
      expect.objectContaining({ path: "agents.defaults.sandbox.docker.network", value: "bridge" }),
    ]);

    expect((await cordon(["config", "untrust", configFile])).out).toMatch(/^untrusted /);
    expect((await cordon(["config", "untrust", configFile])).out).toMatch(/was not trusted\n$/);
  });

  it("says when a trusted file loosens nothing", async () => {
    await writeFile(configFile, `{ tools: { deny: ["exec"] } }`);
    const trusted = await cordon(["config", "trust", configFile]);
    expect(trusted.out).toContain("it loosens nothing");
  });

  it("refuses to trust a file that is missing or invalid, exit 2", async () => {
    const missing = await cordon(["config", "trust", path.join(dir, "nope.json5")]);
    expect(missing.code).toBe(ExitCode.usage);
    expect(missing.err).toMatch(/there is no config file at .*nope\.json5/);
    await writeFile(configFile, `{ sandbox: {} }`);
    const invalid = await cordon(["config", "trust", configFile]);
    expect(invalid.code).toBe(ExitCode.usage);
    expect(invalid.err).toContain('unknown key "sandbox"');
  });
});

describe("cordon config init", () => {
  it("writes a starter config that validate accepts, and never overwrites without --force", async () => {
    const written = await cordon(["config", "init", configFile]);
    expect(written.code, written.err).toBe(0);
    expect(written.out).toContain("cordon config validate --config");
    expect(await readFile(configFile, "utf8")).toMatch(/^\/\/ cordon\.json5: /);
    const validated = await cordon(["config", "validate", "--config", configFile]);
    expect(validated.code, validated.err).toBe(0);

    await writeFile(configFile, "{ tools: { deny: ['exec'] } }");
    const again = await cordon(["config", "init", configFile]);
    expect(again.code).toBe(ExitCode.usage);
    expect(again.err).toMatch(/already exists.*--force/s);
    expect(await readFile(configFile, "utf8")).toBe("{ tools: { deny: ['exec'] } }");

    expect((await cordon(["config", "init", configFile, "--force"])).code).toBe(0);
    expect(await readFile(configFile, "utf8")).toMatch(/^\/\/ cordon\.json5: /);
  });

  it("with --force replaces a symbolic link, not the file it points at", async () => {
    const victim = path.join(dir, "victim.txt");
    await writeFile(victim, "keep me");
    await symlink(victim, configFile);
    expect((await cordon(["config", "init", configFile])).code).toBe(ExitCode.usage);
    expect((await cordon(["config", "init", configFile, "--force"])).code).toBe(0);
    expect(await readFile(victim, "utf8")).toBe("keep me");
    expect((await lstat(configFile)).isSymbolicLink()).toBe(false);
  });
});
