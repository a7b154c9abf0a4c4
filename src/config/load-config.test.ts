import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";

import { afterEach, beforeEach, describe, expect, it } from "vitest";

import { ConfigError, ExitCode } from "../common/index.js";
import { configJsonSchema, cordonConfigSchema, loadConfig, parseConfig } from "./index.js";

let dir: string;
const home = "/home/tester";

beforeEach(async () => {
  dir = await mkdtemp(path.join(tmpdir(), "cordon-config-"));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function writeConfig(name: string, text: string): Promise<string> {
  const file = path.join(dir, name);
  await mkdir(path.dirname(file), { recursive: true });
  await writeFile(file, text);
  return file;
}

async function loadError(options: Parameters<typeof loadConfig>[0]): Promise<ConfigError> {
  const error = await loadConfig(options).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(ConfigError);
  return error as ConfigError;
}

describe("finding the config file", () => {
  it("uses built-in defaults only when there is no file, with the working directory as workspace", async () => {
    const loaded = await loadConfig({ cwd: dir, env: {}, homeDir: home });
    expect(loaded.file).toBeUndefined();
    const { defaults } = loaded.config.agents;
    expect(defaults.workspace).toBe(dir);
    expect(defaults.sandbox).toMatchObject({
      mode: "all",
      scope: "session",
      workspaceAccess: "none",
      seed: true,
    });
    expect(defaults.sandbox.docker).toMatchObject({
      network: "none",
      pidsLimit: 256,
      memory: "1g",
      cpus: 1,
      readOnlyRoot: true,
      capDrop: ["ALL"],
      containerPrefix: "cordon",
      workdir: "/workspace",
    });
    expect(Object.keys(defaults.sandbox.docker.tmpfs).sort()).toEqual([
      "/home/sandbox",
      "/run",
      "/tmp",
      "/var/tmp",
    ]);
    for (const options of Object.values(defaults.sandbox.docker.tmpfs)) {
      expect(options).toMatch(/size=\d+m/);
    }
    expect(loaded.config.tools.profile).toBe("coding");
    expect(loaded.explicit).toEqual({});
  });

  it("finds ./cordon.json5, reads JSON5, and resolves relative paths against the file's directory", async () => {
    await writeConfig(
      "cordon.json5",
      `// comments and trailing commas are fine
      { agents: { defaults: { workspace: "./repo", }, list: [{ id: "ops", workspace: "./ops" }] } }`,
    );
    const loaded = await loadConfig({ cwd: dir, env: {}, homeDir: home });
    expect(loaded.file).toBe(path.join(dir, "cordon.json5"));
    expect(loaded.config.agents.defaults.workspace).toBe(path.join(dir, "repo"));
    expect(loaded.config.agents.list[0]?.workspace).toBe(path.join(dir, "ops"));
  });

  it("resolves ~ in a named file's workspace against the home directory", async () => {
    await writeConfig("named.json5", `{ agents: { list: [{ id: "ops", workspace: "~/ops" }] } }`);
    const loaded = await loadConfig({
      cwd: dir,
      env: {},
      homeDir: home,
      configPath: "named.json5",
    });
    expect(loaded.config.agents.list[0]?.workspace).toBe("/home/tester/ops");
  });

  it("takes --config over CORDON_CONFIG over ./cordon.json5", async () => {
    await writeConfig("cordon.json5", `{ model: "from-cwd" }`);
    const fromEnv = await writeConfig("env/cordon.json5", `{ model: "from-env" }`);
    const fromFlag = await writeConfig("flag/c.json5", `{ model: "from-flag" }`);
    const env = { CORDON_CONFIG: fromEnv };
    expect((await loadConfig({ cwd: dir, env: {} })).config.model).toBe("from-cwd");
    expect((await loadConfig({ cwd: dir, env: { CORDON_CONFIG: "" } })).config.model).toBe(
      "from-cwd",
    );
    expect((await loadConfig({ cwd: dir, env })).config.model).toBe("from-env");
    const flagged = await loadConfig({ cwd: dir, env, configPath: "flag/c.json5" });
    expect(flagged.config.model).toBe("from-flag");
    expect(flagged.file).toBe(fromFlag);
  });

  it("names the source of a missing file", async () => {
    expect((await loadError({ cwd: dir, env: {}, configPath: "nope.json5" })).message).toMatch(
      /nope\.json5 \(from --config\) does not exist/,
    );
    expect((await loadError({ cwd: dir, env: { CORDON_CONFIG: "/x/y.json5" } })).message).toMatch(
      /from CORDON_CONFIG/,
    );
  });
});

describe("layering: defaults → file → environment → flags", () => {
  it("lets the environment beat the file, even an agent's own entry", async () => {
    await writeConfig(
      "cordon.json5",
      `{ agents: { defaults: { sandbox: { mode: "all" } }, list: [{ id: "ops", sandbox: { mode: "non-main", scope: "agent" } }] } }`,
    );
    const loaded = await loadConfig({
      cwd: dir,
      configPath: "cordon.json5",
      env: { CORDON_SANDBOX_MODE: "off", CORDON_MODEL: "claude-x" },
    });
    expect(loaded.config.agents.defaults.sandbox.mode).toBe("off");
    expect(loaded.config.agents.list[0]?.sandbox).toMatchObject({ mode: "off", scope: "agent" });
    expect(loaded.config.agents.list[0]?.model).toEqual({ primary: "claude-x" });
  });

  it("lets flags beat the environment; lists replace and maps merge", async () => {
    await writeConfig(
      "cordon.json5",
      `{ tools: { deny: ["exec", "process"] },
         agents: { defaults: { sandbox: { docker: { tmpfs: { "/cache": "size=8m" }, env: { A: "1" } } } } } }`,
    );
    const loaded = await loadConfig({
      cwd: dir,
      env: { CORDON_SANDBOX_MODE: "off" },
      overrides: {
        tools: { deny: ["write"] },
        agents: {
          defaults: {
            sandbox: { mode: "non-main", docker: { env: { B: "2" }, tmpfs: { "/run": null } } },
          },
        },
      },
    });
    const { config } = loaded;
    expect(config.tools.deny).toEqual(["write"]);
    expect(config.agents.defaults.sandbox.mode).toBe("non-main");
    expect(config.agents.defaults.sandbox.docker.env).toEqual({ A: "1", B: "2" });
    expect(config.agents.defaults.sandbox.docker.tmpfs).toEqual({
      "/tmp": "rw,nosuid,nodev,exec,size=256m",
      "/var/tmp": "rw,nosuid,nodev,exec,size=64m",
      "/run": null,
      "/home/sandbox": "rw,nosuid,nodev,exec,size=512m",
      "/cache": "size=8m",
    });
    expect(loaded.explicit).toMatchObject({ tools: { deny: ["write"] } });
  });

  it("resolves flag and environment workspaces against the working directory", async () => {
    const loaded = await loadConfig({
      cwd: dir,
      env: {},
      overrides: { agents: { defaults: { workspace: "sub" } } },
    });
    expect(loaded.config.agents.defaults.workspace).toBe(path.join(dir, "sub"));
  });

  it("refuses a bad environment value, naming the variable and the choices", async () => {
    const error = await loadError({ cwd: dir, env: { CORDON_SANDBOX_SCOPE: "global" } });
    expect(error.message).toMatch(
      /CORDON_SANDBOX_SCOPE="global" is not valid: expected one of session, agent, shared/,
    );
    expect(error.exitCode).toBe(ExitCode.usage);
  });
});

describe("the user's own config ($XDG_CONFIG_HOME/cordon/config.json5)", () => {
  it("lies under the project's file, is trusted, and is named in the result", async () => {
    const user = await writeConfig(
      "xdg/cordon/config.json5",
      `{ agents: { defaults: { sandbox: { disk: "unlimited", docker: { memory: "1g", cpus: 2 } } } } }`,
    );
    // Found in the working directory, untrusted: it may tighten, and it beats the user's file.
    await writeConfig(
      "project/cordon.json5",
      `{ agents: { defaults: { sandbox: { docker: { memory: "512m" } } } } }`,
    );
    const loaded = await loadConfig({
      cwd: path.join(dir, "project"),
      env: { XDG_CONFIG_HOME: path.join(dir, "xdg") },
      homeDir: home,
      stateDir: path.join(dir, "state"),
    });
    expect(loaded.userFile).toBe(user);
    expect(loaded.source).toMatchObject({ origin: "working directory", trusted: false });
    // A loosening key from the user's own file needs no trust; the project's file cannot set one.
    expect(loaded.config.agents.defaults.sandbox.disk).toBe("unlimited");
    expect(loaded.config.agents.defaults.sandbox.docker).toMatchObject({
      memory: "512m",
      cpus: 2,
    });
  });

  it("is looked for under ~/.config when XDG_CONFIG_HOME is unset, and is optional", async () => {
    await writeConfig(".config/cordon/config.json5", `{ tools: { deny: ["exec"] } }`);
    const found = await loadConfig({ cwd: dir, env: {}, homeDir: dir });
    expect(found.userFile).toBe(path.join(dir, ".config", "cordon", "config.json5"));
    expect(found.config.tools.deny).toEqual(["exec"]);
    const none = await loadConfig({ cwd: dir, env: {}, homeDir: path.join(dir, "elsewhere") });
    expect(none.userFile).toBeUndefined();
  });

  it("reports its own mistakes at its own path", async () => {
    const user = await writeConfig(
      "xdg/cordon/config.json5",
      `{ agents: { defaults: { sandbox: { mode: "sometimes" } } } }`,
    );
    const error = await loadError({
      cwd: dir,
      env: { XDG_CONFIG_HOME: path.join(dir, "xdg") },
      homeDir: home,
    });
    expect(error.message).toContain(user);
    expect(error.message).toContain("agents.defaults.sandbox.mode");
  });
});

describe("validation errors", () => {
  it("lists every problem as path: message, with the fix, and exits 2", async () => {
    const file = await writeConfig(
      "cordon.json5",
      `{
        tools: { profile: "everything", alow: ["read"] },
        agents: {
          defaults: { sandbox: { mode: "sometimes", docker: { pidsLimit: 0, memory: "lots" } } },
          list: [{ id: "--" }, { id: "a", default: true }, { id: " A", default: true }],
        },
        extra: 1,
      }`,
    );
    const error = await loadError({ cwd: dir, env: {} });
    expect(error.exitCode).toBe(ExitCode.usage);
    const lines = error.message
      .split("\n")
      .slice(1)
      .map((l) => l.trim());
    expect(error.message.split("\n")[0]).toBe(`${file} has 9 problems:`);
    expect(lines).toEqual(
      expect.arrayContaining([
        'tools.profile: expected one of "minimal", "coding", "full"',
        'tools: unknown key "alow" (did you mean "allow"?)',
        'agents.defaults.sandbox.mode: expected one of "off", "non-main", "all"',
        expect.stringMatching(/^agents\.defaults\.sandbox\.docker\.pidsLimit: .*>=1/),
        expect.stringMatching(
          /^agents\.defaults\.sandbox\.docker\.memory: a size is a number of bytes/,
        ),
        "agents.list[0].id: an agent id needs at least one letter or digit",
        'agents.list[2].id: duplicate agent id "a" (also agents.list[1])',
        "agents.list[2].default: more than one agent has default: true",
        '(root): unknown key "extra"',
      ]),
    );
    expect(error.fix).toMatch(/cordon config schema/);
  });

  it("reports a bind of the wrong form at the bind's own path", async () => {
    await writeConfig(
      "cordon.json5",
      `{ agents: { defaults: { sandbox: { docker: { binds: [{ source: "/a", target: "/b", mode: "rw" }] } } } } }`,
    );
    const error = await loadError({ cwd: dir, env: {} });
    expect(error.message).toMatch(
      /agents\.defaults\.sandbox\.docker\.binds\[0\]: unknown key "mode"/,
    );
  });

  const messageOf = (value: unknown) => {
    try {
      parseConfig(value);
    } catch (error) {
      return (error as Error).message;
    }
    return "";
  };

  it("suggests the key a typo was meant to be, also inside lists and unions", () => {
    expect(
      messageOf({ agents: { defaults: { sandbox: { docker: { nework: "none", pidLimit: 1 } } } } }),
    ).toMatch(
      /unknown key "nework" \(did you mean "network"\?\)[\s\S]*"pidLimit" \(did you mean "pidsLimit"\?\)/,
    );
    expect(messageOf({ agents: { list: [{ id: "a", sandbx: {} }] } })).toMatch(
      /agents\.list\[0\]: unknown key "sandbx" \(did you mean "sandbox"\?\)/,
    );
    expect(messageOf({ model: { primry: "x" } })).toMatch(
      /model: unknown key "primry" \(did you mean "primary"\?\)/,
    );
    expect(messageOf({ zzzzzz: 1 })).toMatch(/unknown key "zzzzzz"$/m);
  });

  it("points a key written a level or two too high at where it belongs", () => {
    expect(messageOf({ sandbox: { egress: { trustHostCertificates: true } } })).toMatch(
      /\(root\): unknown key "sandbox" \(did you mean "agents\.defaults\.sandbox"\?\)$/m,
    );
    expect(messageOf({ agents: { defaults: { egress: {} } } })).toMatch(
      /agents\.defaults: unknown key "egress" \(did you mean "sandbox\.egress"\?\)/,
    );
    // `tools.sandbox` exists too: with nothing written under it that tells them apart, no guess.
    expect(messageOf({ sandbox: {} })).toMatch(/\(root\): unknown key "sandbox"$/m);
  });

  it("points at the line and column of a JSON5 syntax error", async () => {
    await writeConfig("cordon.json5", `{\n  model: "x",\n  tools: { profile: }\n}`);
    const error = await loadError({ cwd: dir, env: {} });
    expect(error.message).toMatch(/cordon\.json5:3:\d+ is not valid JSON5/);
  });

  it("refuses a file whose top level is not an object", async () => {
    await writeConfig("cordon.json5", `["a"]`);
    expect((await loadError({ cwd: dir, env: {} })).message).toMatch(/must contain an object/);
  });

  it("refuses NUL bytes in env values and strings", () => {
    expect(() =>
      parseConfig({ agents: { defaults: { sandbox: { docker: { env: { A: "x\0y" } } } } } }),
    ).toThrow(ConfigError);
  });

  it("cannot be used to pollute Object.prototype", async () => {
    await writeConfig(
      "cordon.json5",
      `{ "__proto__": { "polluted": true }, agents: { defaults: { "__proto__": { x: 1 } } } }`,
    );
    await loadConfig({ cwd: dir, env: {} }).catch(() => undefined);
    expect(({} as Record<string, unknown>)["polluted"]).toBeUndefined();
    expect(({} as Record<string, unknown>)["x"]).toBeUndefined();
  });
});

describe("the JSON Schema export", () => {
  it("describes the input with defaults and rejects unknown keys", () => {
    const schema = configJsonSchema() as {
      additionalProperties: boolean;
      properties: Record<string, unknown>;
    };
    expect(schema.additionalProperties).toBe(false);
    expect(Object.keys(schema.properties).sort()).toEqual([
      "$schema",
      "agents",
      "fixTests",
      "model",
      "tools",
    ]);
    const text = JSON.stringify(schema);
    for (const key of [
      "workspaceAccess",
      "dangerouslyAllowHostNetwork",
      "containerPrefix",
      "alsoAllow",
    ]) {
      expect(text).toContain(`"${key}"`);
    }
    expect(text).toContain('"default":"all"');
  });

  it("accepts a config with every section filled in", () => {
    const result = cordonConfigSchema.safeParse({
      $schema: "./schema.json",
      model: { primary: "m", fallbacks: ["f"] },
      tools: {
        profile: "minimal",
        allow: ["*"],
        alsoAllow: ["exec"],
        deny: ["bash"],
        sandbox: { tools: { allow: ["group:fs"], alsoAllow: [], deny: ["write"] } },
        exec: { timeoutSec: 60, maxOutputBytes: 65536 },
      },
      agents: {
        defaults: {
          workspace: "/w",
          model: "m2",
          sandbox: {
            mode: "non-main",
            scope: "agent",
            workspaceAccess: "ro",
            seed: false,
            workspaceRoot: "/srv/cordon",
            prune: { idleHours: 1, maxAgeDays: 2 },
            docker: {
              image: "img:1",
              containerPrefix: "ci",
              workdir: "/work",
              readOnlyRoot: true,
              tmpfs: { "/tmp": "size=1m" },
              network: "bridge",
              user: "1000:1000",
              capDrop: ["ALL"],
              env: { LANG: "C.UTF-8" },
              memory: 536870912,
              memorySwap: "1g",
              cpus: 0.5,
              pidsLimit: 64,
              ulimits: { nofile: { soft: 1024, hard: 2048 }, nproc: 256 },
              seccompProfile: "default",
              apparmorProfile: "docker-default",
              dns: ["1.1.1.1", "::1"],
              extraHosts: ["db:10.0.0.2"],
              binds: ["/data:/data:ro", { source: "/d2", target: "/d2", readOnly: false }],
              bindRoots: ["/data"],
              runtime: "runsc",
              dangerouslyAllowHostNetwork: false,
              dangerouslyAllowContainerNamespaceJoin: false,
              dangerouslyAllowUnconfined: false,
              dangerouslyAllowExternalBindSources: false,
              dangerouslyAllowEnvNames: [],
            },
          },
          tools: { profile: "coding" },
        },
        list: [{ id: "ops", default: true, name: "Ops", tools: { deny: ["write"] } }],
      },
    });
    expect(result.error?.issues).toBeUndefined();
  });
});
