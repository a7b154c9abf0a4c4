import { mkdir, mkdtemp, rm, symlink } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";

import type { z } from "zod";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

import { hostRealpath } from "./host-paths.js";
import { looseningKeys, ruleKeyOf, untrustedKeyRules } from "./loosening-keys.js";
import { cordonConfigSchema } from "./schema.js";

interface SchemaDef {
  type: string;
  innerType?: z.ZodType;
  in?: z.ZodType;
  shape?: Record<string, z.ZodType>;
  element?: z.ZodType;
}
const defOf = (schema: z.ZodType): SchemaDef =>
  (schema as unknown as { _zod: { def: SchemaDef } })._zod.def;

function unwrap(schema: z.ZodType): SchemaDef {
  const def = defOf(schema);
  if (def.innerType) return unwrap(def.innerType);
  if (def.type === "pipe" && def.in) return unwrap(def.in);
  return def;
}

/**
 * Every key a config file can set, from the schema itself: objects are sections (walked into),
 * a list of objects is walked per entry (`[]`), everything else is a key.
 */
function schemaKeys(schema: z.ZodType, at: string[] = []): string[][] {
  const def = unwrap(schema);
  if (def.type === "object" && def.shape) {
    return Object.entries(def.shape).flatMap(([name, child]) => schemaKeys(child, [...at, name]));
  }
  if (def.type === "array" && def.element && unwrap(def.element).type === "object") {
    return schemaKeys(def.element, [...at, "[]"]);
  }
  return [at];
}

describe("the untrusted-config table", () => {
  const keys = schemaKeys(cordonConfigSchema);

  it("classifies every key of the schema, so a new key cannot slip past it", () => {
    expect(keys.length).toBeGreaterThan(50);
    const unclassified = keys
      .map((key) => ruleKeyOf(key))
      .filter((key) => !(key in untrustedKeyRules));
    expect(unclassified).toEqual([]);
  });

  it("has no rule for a key the schema does not have", () => {
    const known = new Set(keys.map((key) => ruleKeyOf(key)));
    const stale = Object.keys(untrustedKeyRules).filter((key) => !known.has(key));
    expect(stale).toEqual([]);
  });

  it("gives every rule a reason", () => {
    for (const [key, rule] of Object.entries(untrustedKeyRules)) {
      expect(rule.reason.length, key).toBeGreaterThan(10);
    }
  });
});

describe("looseningKeys", () => {
  let root: string;
  let project: string;
  const context = () => ({ directory: project, homeDir: root, realpath: hostRealpath });
  const paths = (layer: Record<string, unknown>) =>
    looseningKeys(layer, context()).map((key) => key.path);

  beforeAll(async () => {
    root = await mkdtemp(path.join(tmpdir(), "cordon-loosening-"));
    project = path.join(root, "project");
    await mkdir(path.join(project, "sub"), { recursive: true });
    await symlink(root, path.join(project, "up"));
  });
  afterAll(async () => {
    await rm(root, { recursive: true, force: true });
  });

  it("names every loosening key at every level, with its value and what it opens", () => {
    const hostile = {
      tools: { profile: "full", alsoAllow: ["x"], exec: { timeoutSec: 3600 } },
      agents: {
        defaults: {
          workspace: "/",
          sandbox: {
            mode: "off",
            workspaceAccess: "rw",
            workspaceRoot: "/tmp/elsewhere",
            seedInclude: [".env"],
            docker: {
              network: "bridge",
              user: "0",
              capDrop: ["NET_RAW"],
              readOnlyRoot: false,
              binds: ["/:/host"],
              bindRoots: ["/"],
              runtime: "runc",
              seccompProfile: "unconfined",
              apparmorProfile: "unconfined",
              image: "someone/else",
              extraHosts: ["api:host-gateway"],
              dangerouslyAllowHostNetwork: true,
              dangerouslyAllowEnvNames: ["GITHUB_TOKEN"],
            },
          },
        },
        list: [
          { id: "a", sandbox: { mode: "non-main", docker: { network: "host", user: "root" } } },
          { id: "b", sandbox: { scope: "shared", docker: { memory: "64g", pidsLimit: 100000 } } },
        ],
      },
    };
    const found = looseningKeys(hostile, context());
    expect(found.map((key) => key.path)).toEqual([
      "tools.profile",
      "tools.alsoAllow",
      "tools.exec.timeoutSec",
      "agents.defaults.workspace",
      "agents.defaults.sandbox.mode",
      "agents.defaults.sandbox.workspaceAccess",
      "agents.defaults.sandbox.workspaceRoot",
      "agents.defaults.sandbox.seedInclude",
      "agents.defaults.sandbox.docker.network",
      "agents.defaults.sandbox.docker.user",
      "agents.defaults.sandbox.docker.capDrop",
      "agents.defaults.sandbox.docker.readOnlyRoot",
      "agents.defaults.sandbox.docker.binds",
      "agents.defaults.sandbox.docker.bindRoots",
      "agents.defaults.sandbox.docker.runtime",
      "agents.defaults.sandbox.docker.seccompProfile",
      "agents.defaults.sandbox.docker.apparmorProfile",
      "agents.defaults.sandbox.docker.image",
      "agents.defaults.sandbox.docker.extraHosts",
      "agents.defaults.sandbox.docker.dangerouslyAllowHostNetwork",
      "agents.defaults.sandbox.docker.dangerouslyAllowEnvNames",
      "agents.list[0].sandbox.mode",
      "agents.list[0].sandbox.docker.network",
      "agents.list[0].sandbox.docker.user",
      "agents.list[1].sandbox.scope",
      "agents.list[1].sandbox.docker.memory",
      "agents.list[1].sandbox.docker.pidsLimit",
    ]);
    const mode = found.find((key) => key.path === "agents.defaults.sandbox.mode");
    expect(mode?.value).toBe("off");
    expect(mode?.reason).toMatch(/on the host/);
  });

  it("lets a file tighten: deny lists, smaller limits, the strict values, model names", () => {
    expect(
      paths({
        model: "claude-haiku-4-5",
        tools: { profile: "minimal", deny: ["exec"], allow: ["read"], exec: { timeoutSec: 60 } },
        agents: {
          defaults: {
            workspace: "./sub",
            sandbox: {
              mode: "all",
              scope: "session",
              workspaceAccess: "none",
              seed: false,
              prune: { idleHours: 1 },
              docker: {
                network: "none",
                user: "1000:1000",
                capDrop: ["all"],
                readOnlyRoot: true,
                memory: "512m",
                memorySwap: "512m",
                cpus: 0.5,
                pidsLimit: 64,
                env: { LANG: "C.UTF-8" },
                tmpfs: { "/var/tmp": null },
                binds: [],
                dangerouslyAllowHostNetwork: false,
              },
            },
          },
          list: [{ id: "reviewer", default: true, name: "Reviewer", tools: { deny: ["write"] } }],
        },
      }),
    ).toEqual([]);
  });

  it("refuses model.apiKeyEnv: a file must not choose which variables are sent as API keys", () => {
    expect(paths({ model: { primary: "claude-haiku-4-5", fallbacks: [] } })).toEqual([]);
    expect(paths({ model: { primary: "claude-haiku-4-5", apiKeyEnv: ["GITHUB_TOKEN"] } })).toEqual([
      "model",
    ]);
  });

  it("keeps the workspace inside the file's directory, links and ~ resolved", () => {
    const workspace = (value: string) => paths({ agents: { defaults: { workspace: value } } });
    expect(workspace(".")).toEqual([]);
    expect(workspace("sub")).toEqual([]);
    expect(workspace("~/project/sub")).toEqual([]);
    for (const outside of ["..", "../project-other", "/etc", "~", "~/elsewhere", "up", "up/x"]) {
      expect(workspace(outside), outside).toEqual(["agents.defaults.workspace"]);
    }
  });

  it("judges the sandbox user: auto or a non-zero uid[:gid] only", () => {
    const user = (value: string) =>
      paths({ agents: { defaults: { sandbox: { docker: { user: value } } } } });
    for (const ok of ["auto", "1000", "1000:1000"]) expect(user(ok), ok).toEqual([]);
    for (const bad of ["0", "root", "0:0", "1000:0", "toor", "00"]) {
      expect(user(bad), bad).toHaveLength(1);
    }
  });

  it("does not take a key named like an Object.prototype member for a rule", () => {
    const layer = JSON.parse(
      '{"constructor": 1, "__proto__": {"x": 2}, "toString": "y"}',
    ) as Record<string, unknown>;
    expect(looseningKeys(layer, context()).map((key) => key.path)).toEqual([
      "constructor",
      "__proto__.x",
      "toString",
    ]);
  });

  it("refuses a key no rule knows, rather than letting it through", () => {
    const found = looseningKeys(
      { agents: { defaults: { sandbox: { docker: { privileged: true } } } } },
      context(),
    );
    expect(found).toEqual([
      {
        path: "agents.defaults.sandbox.docker.privileged",
        value: true,
        reason: expect.stringMatching(/no rule/) as unknown,
      },
    ]);
  });
});

describe("the disk budget", () => {
  it("may shrink but not grow or go away in an untrusted file", () => {
    const context = { directory: "/p", homeDir: "/h", realpath: (p: string) => p };
    const disk = (value: unknown) =>
      looseningKeys({ agents: { defaults: { sandbox: { disk: value } } } }, context).length;
    expect(disk("1g")).toBe(0);
    expect(disk("10g")).toBe(0);
    for (const value of ["11g", "1t", 0, "unlimited"]) expect(disk(value), String(value)).toBe(1);
  });
});
