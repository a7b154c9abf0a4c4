import { describe, expect, it } from "vitest";

import { ConfigError, ExitCode } from "../common/index.js";
import { parseConfig } from "../config/index.js";
import { containerNameOf, maxContainerNameLength, workspaceIdOf } from "./container-name.js";
import { canonicalJson, hashOf } from "../common/index.js";
import { explainPlan, redactPlanSecrets } from "./explain.js";
import { offlineEnvironment } from "./offline-defaults.js";
import { planRun } from "./plan-run.js";
import { normalizeSessionKey } from "./session-key.js";
import {
  fakeEntryKind,
  fakeRealpath,
  home,
  plan,
  project,
  refusal,
  stateDir,
  withDocker,
} from "./testing/plan-fixtures.js";

const mode = (m: string) => ({ agents: { defaults: { sandbox: { mode: m } } } });

describe("sandbox mode against the session key", () => {
  it.each([
    ["off", undefined, false],
    ["off", "task", false],
    ["all", undefined, true],
    ["all", "task", true],
    ["non-main", undefined, false],
    ["non-main", "main", false],
    ["non-main", "agent:main:main", false],
    ["non-main", "task", true],
    ["non-main", "MAIN", true],
    ["non-main", "Main", true],
    ["non-main", "mаin", true], // Cyrillic а
    ["non-main", "main:x", true],
    ["non-main", "agent:main:main:x", true],
    ["non-main", "agent:main:MAIN", true],
  ] as const)("mode %s, session %s → sandboxed %s", (m, session, expected) => {
    const result = plan(mode(m), session === undefined ? {} : { sessionKey: session });
    expect(result.sandbox.enabled).toBe(expected);
    expect(result.sandbox.spec !== undefined).toBe(expected);
    expect(result.sandbox.reason).toContain("agents.defaults.sandbox.mode");
  });

  it("warns that mode off and an unsandboxed main session have no isolation", () => {
    expect(plan(mode("off")).warnings.join("\n")).toMatch(/mode is off .*run on this machine/);
    expect(plan(mode("non-main")).warnings.join("\n")).toMatch(
      /main session agent:main:main runs on the host/,
    );
    expect(plan(mode("all")).warnings).toEqual([]);
  });

  it("takes an agent's own mode over the defaults and names its key", () => {
    const result = plan({
      agents: {
        defaults: { sandbox: { mode: "off" } },
        list: [{ id: "ci", sandbox: { mode: "all" } }],
      },
    });
    expect(result.sandbox.enabled).toBe(true);
    expect(result.sandbox.keys.mode).toBe("agents.list[0].sandbox.mode");
  });
});

describe("session keys", () => {
  it.each([
    [undefined, "agent:ops:main"],
    ["main", "agent:ops:main"],
    ["fix-1", "agent:ops:fix-1"],
    ["agent:ops:fix-1", "agent:ops:fix-1"],
    ["a/b:c", "agent:ops:a/b:c"],
  ])("%s → %s", (input, expected) => {
    expect(normalizeSessionKey("ops", input)).toBe(expected);
  });

  it.each([
    ["", /empty/],
    ["agent:other:x", /belongs to agent "other"/],
    ["agent:ops", /not of the form/],
    ["agent:ops:", /not of the form/],
    ["a\u0000b", /control characters/],
    ["a\nb", /control characters/],
    [" main", /whitespace/],
    ["main ", /whitespace/],
    ["x".repeat(200), /longer than 120/],
  ])("refuses %j", (input, message) => {
    expect(() => normalizeSessionKey("ops", input)).toThrow(ConfigError);
    expect(() => normalizeSessionKey("ops", input)).toThrow(message);
  });
});

describe("choosing the agent", () => {
  const config = {
    agents: { list: [{ id: "a" }, { id: "b", default: true, name: "Bee" }, { id: "c" }] },
  };

  it("uses the named agent, else the default one, else the first, else main", () => {
    expect(plan(config, { agentId: "c" }).agent.id).toBe("c");
    expect(plan(config).agent).toMatchObject({ id: "b", name: "Bee" });
    expect(plan({ agents: { list: [{ id: "x" }, { id: "y" }] } }).agent.id).toBe("x");
    expect(plan({}).agent.id).toBe("main");
    expect(plan({}, { agentId: "main" }).agent.id).toBe("main");
  });

  it("refuses an unknown agent, listing the known ones", () => {
    expect(() => plan(config, { agentId: "z" })).toThrow(
      /no agent "z" in the config \(agents: a, b, c\)/,
    );
    expect(() => plan({}, { agentId: "z" })).toThrow(ConfigError);
  });

  it("layers the model: top level, then agents.defaults, then the agent", () => {
    const result = plan({
      model: { primary: "top", fallbacks: ["f1"] },
      agents: { defaults: { model: { fallbacks: ["f2"] } }, list: [{ id: "a", model: "own" }] },
    });
    expect(result.agent.model).toEqual({ primary: "own", fallbacks: ["f2"] });
    expect(plan({ model: "just-this" }).agent.model).toEqual({
      primary: "just-this",
      fallbacks: [],
    });
  });

  it("uses the agent's workspace after resolving symlinks", () => {
    const result = plan(
      { agents: { list: [{ id: "a", workspace: "/home/u/link" }] } },
      { links: { "/home/u/link": "/srv/repo" } },
    );
    expect(result.agent.workspace).toBe("/srv/repo");
  });
});

describe("scope keys and container names", () => {
  const projectId = workspaceIdOf(project);

  it.each([
    ["session", "fix", `session:agent:main:fix@${projectId}`],
    ["agent", "fix", `agent:main@${projectId}`],
    ["shared", "fix", `shared@${projectId}`],
  ])("scope %s → key %s", (scope, session, key) => {
    const spec = plan({ agents: { defaults: { sandbox: { scope } } } }, { sessionKey: session })
      .sandbox.spec;
    expect(spec?.scopeKey).toBe(key);
    expect(spec?.containerName).toMatch(/^cordon-proj-[a-z0-9-]+-[0-9a-f]{12}$/);
  });

  it("gives every session of an agent-scoped agent the same container and hash", () => {
    const config = { agents: { list: [{ id: "ops", sandbox: { scope: "agent" } }] } };
    const one = plan(config, { sessionKey: "one" }).sandbox.spec;
    const two = plan(config, { sessionKey: "two" }).sandbox.spec;
    expect(one?.containerName).toBe(two?.containerName);
    expect(one?.configHash).toBe(two?.configHash);
    expect(one?.sessionKey).not.toBe(two?.sessionKey);
  });

  it.each(["session", "agent", "shared"])(
    "scope %s: two projects with the same session get separate containers and private copies",
    (scope) => {
      const config = (workspace: string) => ({
        agents: { defaults: { workspace, sandbox: { scope } } },
      });
      const a = plan(config("/home/u/shop"), { sessionKey: "main" }).sandbox.spec;
      const b = plan(config("/home/u/blog"), { sessionKey: "main" }).sandbox.spec;
      expect(a?.scopeKey).not.toBe(b?.scopeKey);
      expect(a?.containerName).not.toBe(b?.containerName);
      expect(a?.privateWorkspace).not.toBe(b?.privateWorkspace);
      expect(a?.privateWorkspace).toBe(`${stateDir}/workspaces/${a?.containerName}`);
      expect(a?.containerName).toMatch(/^cordon-shop-/);
      expect(b?.containerName).toMatch(/^cordon-blog-/);
    },
  );

  it("keys a project by its real path: a symlink to it is the same project, a look-alike is not", () => {
    const direct = plan({ agents: { defaults: { workspace: "/srv/shop" } } }).sandbox.spec;
    const viaLink = plan(
      { agents: { defaults: { workspace: "/home/u/shop" } } },
      { links: { "/home/u/shop": "/srv/shop" } },
    ).sandbox.spec;
    const lookAlike = plan({ agents: { defaults: { workspace: "/srv/other/shop" } } }).sandbox.spec;
    expect(viaLink?.scopeKey).toBe(direct?.scopeKey);
    expect(viaLink?.containerName).toBe(direct?.containerName);
    expect(lookAlike?.containerName).not.toBe(direct?.containerName);
    expect(lookAlike?.containerName.replace(/-[0-9a-f]{12}$/, "")).toBe(
      direct?.containerName.replace(/-[0-9a-f]{12}$/, ""),
    );
  });

  it("keeps names stable, short, Docker-safe and distinct after truncation", () => {
    const long = "x".repeat(100);
    const names = [
      `session:agent:main:${long}-a@${projectId}`,
      `session:agent:main:${long}-b@${projectId}`,
      `session:agent:main:a:b@${projectId}`,
      `session:agent:main:a/b@${projectId}`,
      `session:agent:main:A_B@${projectId}`,
      `session:agent:main:ümlaut@${projectId}`,
      `session:agent:main:%%%@${projectId}`,
      `session:agent:main:main@${workspaceIdOf("/home/u/other")}`,
    ].map((scopeKey) =>
      containerNameOf({ prefix: "cordon", scopeKey, stateDir, workspace: `/home/u/${long}` }),
    );
    expect(new Set(names).size).toBe(names.length);
    for (const name of names) {
      expect(name.length).toBeLessThanOrEqual(maxContainerNameLength);
      expect(name).toMatch(/^[a-z0-9][a-z0-9-]*[a-z0-9]$/);
      // A long project name is cut so the session part still shows.
      expect(name).toMatch(/^cordon-x{20}-session-/);
    }
    const shared = `shared@${projectId}`;
    expect(containerNameOf({ prefix: "cordon", scopeKey: shared, stateDir })).toBe(
      containerNameOf({ prefix: "cordon", scopeKey: shared, stateDir }),
    );
    expect(containerNameOf({ prefix: "cordon", scopeKey: shared, stateDir: "/other" })).not.toBe(
      containerNameOf({ prefix: "cordon", scopeKey: shared, stateDir }),
    );
    expect(
      containerNameOf({ prefix: "ci.x", scopeKey: "%%%", stateDir, workspace: "/%%%" }),
    ).toMatch(/^ci\.x-[0-9a-f]{12}$/);
  });

  it("uses the configured prefix", () => {
    expect(plan(withDocker({ containerPrefix: "ci" })).sandbox.spec?.containerName).toMatch(
      /^ci-proj-session-agent-main-main-[0-9a-f]{12}$/,
    );
  });
});

describe("rw mode keeps the repository's .git read-only (sandbox.protectGitDir)", () => {
  const rw = (sandbox: Record<string, unknown> = {}, docker: Record<string, unknown> = {}) =>
    withDocker(docker, { workspaceAccess: "rw", ...sandbox });
  const gitDir = `${project}/.git`;

  it.each(["directory", "file"] as const)(
    "mounts a .git %s read-only over the workspace's, after the workspace",
    (kind) => {
      const result = plan(rw({}, { workdir: "/src" }), { entries: { [gitDir]: kind } });
      expect(result.sandbox.spec?.mounts).toEqual([
        { source: project, target: "/src", readOnly: false, role: "workspace" },
        { source: gitDir, target: "/src/.git", readOnly: true, role: "git-dir" },
      ]);
      expect(result.warnings).toEqual([]);
      expect(explainPlan(result)).toMatch(
        /\/src\/\.git +← \/home\/u\/proj\/\.git {2}ro {2}\[git-dir\]/,
      );
    },
  );

  it("says a sandbox with no network gets cordon's read-only hosts file", () => {
    expect(explainPlan(plan(rw()))).toMatch(
      /network +none \(loopback only; \/etc\/hosts written by cordon into a volume on the engine, mounted read-only\)/,
    );
  });

  it("mounts nothing extra without a .git, and says the agent could create one", () => {
    const result = plan(rw());
    expect(result.sandbox.spec?.mounts.map((m) => m.role)).toEqual(["workspace"]);
    expect(result.warnings).toEqual([
      `${gitDir} does not exist, so there is no .git to keep read-only: the agent can create one (hooks, config) that git run in this directory would use`,
    ]);
  });

  it("refuses a .git that is a symlink: Docker would follow it, the agent could replace it", () => {
    const message = refusal(rw(), { entries: { [gitDir]: "symlink" } }).message;
    expect(message).toContain(
      `agents.defaults.sandbox.protectGitDir: ${gitDir} is a symlink, so it cannot be mounted read-only in the sandbox; make it a real directory (or worktree file), or set agents.defaults.sandbox.protectGitDir to false`,
    );
  });

  it("with protectGitDir false mounts no .git and explain warns, naming the key", () => {
    const result = plan(
      {
        agents: { list: [{ id: "dev", sandbox: { workspaceAccess: "rw", protectGitDir: false } }] },
      },
      { entries: { [gitDir]: "directory" } },
    );
    expect(result.sandbox.spec?.mounts.map((m) => m.role)).toEqual(["workspace"]);
    expect(explainPlan(result)).toContain(
      `! agents.list[0].sandbox.protectGitDir is false: the agent can write ${gitDir} (hooks, config) that git on this machine runs later`,
    );
  });

  it.each(["none", "ro"])(
    "access %s adds no .git mount: the workspace is not writable",
    (access) => {
      const result = plan(withDocker({}, { workspaceAccess: access }), {
        entries: { [gitDir]: "directory" },
      });
      expect(result.sandbox.spec?.mounts.some((m) => m.role === "git-dir")).toBe(false);
      expect(result.warnings).toEqual([]);
    },
  );

  it("changes the config hash when a .git appears, so the container is recreated with the mount", () => {
    const without = plan(rw()).sandbox.spec?.configHash;
    const withGit = plan(rw(), { entries: { [gitDir]: "directory" } }).sandbox.spec?.configHash;
    expect(withGit).not.toBe(without);
  });

  it.each([
    ["rw", `${project}:/src:rw`],
    ["rw", `${project}/.git:/g:rw`],
    ["rw", `${project}/.git/hooks:/hooks:rw`],
    ["none", `${project}:/src:rw`],
    ["ro", `/home/u/link:/src:rw`],
  ])("access %s: refuses the bind %s, which would hand out the .git read-write", (access, bind) => {
    const message = refusal(withDocker({ binds: [bind] }, { workspaceAccess: access }), {
      entries: { [gitDir]: "directory" },
      links: { "/home/u/link": project },
    }).message;
    expect(message).toMatch(
      /sandbox\.docker\.binds\[0\]: source \S+ exposes the repository's \/home\/u\/proj\/\.git read-write, which agents\.defaults\.sandbox\.protectGitDir keeps read-only; mount it read-only \(:ro\) or set agents\.defaults\.sandbox\.protectGitDir to false/,
    );
  });

  it("allows such binds read-only, or read-write once protectGitDir is off", () => {
    const entries = { [gitDir]: "directory" as const };
    expect(
      plan(rw({}, { binds: [`${project}:/src:ro`] }), { entries }).sandbox.spec?.mounts.at(-1),
    ).toEqual({ source: project, target: "/src", readOnly: true, role: "bind" });
    expect(
      plan(rw({ protectGitDir: false }, { binds: [`${project}/.git:/g:rw`] }), {
        entries,
      }).sandbox.spec?.mounts.at(-1),
    ).toEqual({ source: gitDir, target: "/g", readOnly: false, role: "bind" });
  });
});

describe("the mount plan", () => {
  it("access none: a private workspace under the state directory at the workdir, seeded", () => {
    const spec = plan({}).sandbox.spec;
    const privateDir = `${stateDir}/workspaces/${spec?.containerName}`;
    expect(spec).toMatchObject({
      workspaceAccess: "none",
      seed: true,
      privateWorkspace: privateDir,
    });
    expect(spec?.mounts).toEqual([
      { source: privateDir, target: "/workspace", readOnly: false, role: "workspace" },
    ]);
  });

  it("access ro: the agent workspace read-only at /agent and private scratch at the workdir", () => {
    const spec = plan({ agents: { defaults: { sandbox: { workspaceAccess: "ro" } } } }).sandbox
      .spec;
    expect(spec?.seed).toBe(false);
    expect(spec?.mounts).toEqual([
      { source: spec?.privateWorkspace, target: "/workspace", readOnly: false, role: "workspace" },
      { source: project, target: "/agent", readOnly: true, role: "agent-workspace" },
    ]);
  });

  it("access rw: the agent workspace itself at the workdir, no private directory", () => {
    const spec = plan(withDocker({ workdir: "/src" }, { workspaceAccess: "rw" })).sandbox.spec;
    expect(spec?.privateWorkspace).toBeUndefined();
    expect(spec?.mounts).toEqual([
      { source: project, target: "/src", readOnly: false, role: "workspace" },
    ]);
  });

  it("puts private workspaces under sandbox.workspaceRoot when set", () => {
    const spec = plan({ agents: { defaults: { sandbox: { workspaceRoot: "/srv/cordon" } } } })
      .sandbox.spec;
    expect(spec?.privateWorkspace).toBe(`/srv/cordon/${spec?.containerName}`);
    expect(
      refusal({ agents: { defaults: { sandbox: { workspaceRoot: "/etc/cordon" } } } }).message,
    ).toMatch(/agents\.defaults\.sandbox\.workspaceRoot: \/etc\/cordon is inside \/etc/);
  });

  it("bounds the private workspace by sandbox.disk: 10 GiB by default, sizes like memory, 0 / unlimited for none", () => {
    const disk = (value?: unknown, access = "none") =>
      plan({
        agents: {
          defaults: {
            sandbox: { workspaceAccess: access, ...(value === undefined ? {} : { disk: value }) },
          },
        },
      }).sandbox.spec?.diskBytes;
    expect(disk()).toBe(10 * 1024 ** 3);
    expect(disk("64m")).toBe(64 * 1024 ** 2);
    expect(disk("1.5GiB", "ro")).toBe(1.5 * 1024 ** 3);
    expect(disk(32 * 1024 ** 2)).toBe(32 * 1024 ** 2);
    expect(disk(0)).toBeUndefined();
    expect(disk("unlimited")).toBeUndefined();
    // rw: no private workspace, nothing to bound.
    expect(disk("64m", "rw")).toBeUndefined();
    expect(refusal({ agents: { list: [{ id: "a", sandbox: { disk: "1m" } }] } }).message).toMatch(
      /agents\.list\[0\]\.sandbox\.disk: "1m" is not a disk size of at least 16 MiB/,
    );
  });

  it("explains the disk budget, and says so loudly when there is none", () => {
    const text = (disk: unknown) =>
      explainPlan(plan({ agents: { defaults: { sandbox: { disk } } } }));
    expect(text("64m")).toMatch(/disk +64 MiB for the private workspace .*ENOSPC/);
    expect(text("unlimited")).toMatch(/disk +UNBOUNDED: the sandbox can fill the host's disk/);
  });

  it("says a copy in volumes has its disk budget watched, never an ext4 image", () => {
    const text = (disk: unknown, workspaceStorage: string) =>
      explainPlan(plan({ agents: { defaults: { sandbox: { disk, workspaceStorage } } } }));
    const volume = text("64m", "volume");
    expect(volume).toMatch(
      /disk +64 MiB for the private workspace \(watched: a Docker volume cannot be bounded on disk.*stops the sandbox/,
    );
    expect(volume).not.toMatch(/ext4|ENOSPC/);
    expect(text("unlimited", "volume")).toMatch(
      /UNBOUNDED: the sandbox can fill the engine's disk/,
    );
    expect(text("64m", "host")).toMatch(/64 MiB for the private workspace \(an ext4 image/);
    expect(text("64m", "auto")).toMatch(
      /on a local engine an ext4 image.*elsewhere, in volumes, watched/,
    );
  });

  it("adds configured binds, read-only unless asked, with the resolved source", () => {
    const spec = plan(
      withDocker({
        binds: [
          "/home/u/proj/data:/data",
          "/home/u/cache:/cache:rw",
          { source: "~/models", target: "/models" },
        ],
      }),
      { links: { "/home/u/cache": "/home/u/real-cache" } },
    ).sandbox.spec;
    expect(spec?.mounts.slice(1)).toEqual([
      { source: "/home/u/proj/data", target: "/data", readOnly: true, role: "bind" },
      { source: "/home/u/real-cache", target: "/cache", readOnly: false, role: "bind" },
      { source: "/home/u/models", target: "/models", readOnly: true, role: "bind" },
    ]);
  });
});

describe("hostile bind sources are refused, as written and after symlinks", () => {
  it.each([
    ["/etc", {}, /is \/etc, a system directory/],
    ["/etc/ssl", {}, /inside \/etc/],
    ["//etc", {}, /\/etc/],
    ["/home/u/proj/../../../etc", {}, /\/etc/],
    ["/home/u/proj/./../.ssh", {}, /\.ssh, a credential store/],
    ["/", {}, /root directory/],
    ["/proc/1/root", {}, /\/proc/],
    ["/var/run/docker.sock", {}, /socket/],
    ["/home/u/proj/agent.sock", {}, /socket/],
    ["/run/user/1000", {}, /\/run/],
    ["~/.ssh", {}, /\.ssh, a credential store/],
    ["~/.aws/credentials", {}, /\.aws/],
    ["~/.config/gh", {}, /\.config/],
    ["~/.SSH", {}, /credential store/],
    ["/HOME/U/.ssh", {}, /credential store/],
    ["~", {}, /contains \/home\/u\/\.ssh/],
    ["/home", {}, /contains \/home\/u\/\.ssh/],
    ["/var", {}, /contains \/var\/run/],
    ["/root/.ssh", {}, /credential store/],
    ["/home/u/.cordon/sessions", {}, /state directory/],
    ["/home/u/proj/keys", { "/home/u/proj/keys": "/home/u/.ssh" }, /resolves to \/home\/u\/\.ssh/],
    ["/home/u/proj/sys/x", { "/home/u/proj/sys": "/etc" }, /resolves to \/etc\/x/],
    ["/home/u/proj/up", { "/home/u/proj/up": "/home/u" }, /contains/],
    // ~/.ssh is itself a link: its target is protected too.
    [
      "/data/keys",
      { "/home/u/.ssh": "/data/keys" },
      /\/data\/keys is \/data\/keys, a credential store/,
    ],
  ] as const)("%s", (source, links, message) => {
    const error = refusal(
      withDocker({ binds: [`${source}:/mnt/x`], dangerouslyAllowExternalBindSources: true }),
      {
        links,
      },
    );
    expect(error.exitCode).toBe(ExitCode.policy);
    expect(error.message).toMatch(/agents\.defaults\.sandbox\.docker\.binds\[0\]: source /);
    expect(error.message).toMatch(message);
  });

  it("refuses relative sources and sources outside the bind roots", () => {
    expect(refusal(withDocker({ binds: ["data:/data"] })).message).toMatch(
      /must be an absolute host path/,
    );
    expect(refusal(withDocker({ binds: ["/opt/data:/data"] })).message).toMatch(
      /outside the allowed bind roots \[\/home\/u\/proj, \/home\/u\]; add a root to agents\.defaults\.sandbox\.docker\.bindRoots/,
    );
    // Inside the roots as written, outside once the symlink is resolved.
    expect(
      refusal(withDocker({ binds: ["/home/u/proj/out:/out"] }), {
        links: { "/home/u/proj/out": "/opt/secret" },
      }).message,
    ).toMatch(/\/home\/u\/proj\/out \(resolves to \/opt\/secret\) is outside/);
  });

  it("warns when a read-write bind reopens the workspace that access none or ro keeps closed", () => {
    expect(plan(withDocker({ binds: ["/home/u/proj/src:/src:rw"] })).warnings.join("\n")).toMatch(
      /binds\[0\] mounts the agent workspace .*read-write at \/src, although workspace access is "none"/,
    );
    expect(plan(withDocker({ binds: ["/home/u/proj/src:/src"] })).warnings).toEqual([]);
  });

  it("allows outside sources only with the explicit flag, and says so", () => {
    const result = plan(
      withDocker({ binds: ["/opt/data:/data"], dangerouslyAllowExternalBindSources: true }),
    );
    expect(result.sandbox.spec?.mounts[1]?.source).toBe("/opt/data");
    expect(result.warnings.join("\n")).toMatch(/outside the bind roots/);
    expect(plan(withDocker({ binds: ["/opt/data:/data"], bindRoots: ["/opt"] })).warnings).toEqual(
      [],
    );
  });

  it.each([
    ["/home/u/proj/d:/workspace", /overlaps \/workspace/],
    ["/home/u/proj/d:/workspace/sub", /overlaps \/workspace/],
    ["/home/u/proj/d:/", /whole container/],
    ["/home/u/proj/d:/proc/x", /overlaps \/proc/],
    ["/home/u/proj/d:/dev", /overlaps \/dev/],
    ["/home/u/proj/d:relative", /absolute path in the container/],
    ["/home/u/proj/d:/tmp", /also a tmpfs mount/],
    ["/home/u/proj/d:/x:rx", /mode must be ro or rw/],
    ["/home/u/proj/d", /is not "\/host\/path/],
  ])("refuses the bind %s", (bind, message) => {
    expect(refusal(withDocker({ binds: [bind] })).message).toMatch(message);
  });

  it("reserves /agent under access ro and refuses a target mounted twice", () => {
    expect(
      refusal(withDocker({ binds: ["/home/u/proj/d:/agent/x"] }, { workspaceAccess: "ro" }))
        .message,
    ).toMatch(/overlaps \/agent/);
    expect(
      refusal(withDocker({ binds: ["/home/u/proj/a:/d", "/home/u/proj/b:/d/"] })).message,
    ).toMatch(/binds\[1\]: target \/d is mounted twice/);
  });

  it("refuses to mount or seed a workspace that holds credentials", () => {
    expect(refusal({ agents: { defaults: { workspace: home } } }).message).toMatch(
      /agents\.defaults\.workspace: the agent workspace \/home\/u contains \/home\/u\/\.ssh.*seeding would copy it/,
    );
    expect(
      refusal({
        agents: { list: [{ id: "a", workspace: "/", sandbox: { workspaceAccess: "rw" } }] },
      }).message,
    ).toMatch(/agents\.list\[0\]\.workspace: .*root directory.*mounting would expose it/);
    expect(
      refusal({ agents: { defaults: { workspace: "/home/u/proj/../.ssh" } } }).message,
    ).toMatch(/the agent workspace \/home\/u\/\.ssh is \/home\/u\/\.ssh, a credential store/);
    // A workspace whose path is a symlink to the home directory.
    expect(refusal({}, { links: { [project]: home } }).message).toMatch(
      /the agent workspace \/home\/u contains \/home\/u\/\.ssh/,
    );
    // Not exposed at all: nothing to refuse.
    expect(
      plan({ agents: { defaults: { workspace: home, sandbox: { seed: false } } } }).sandbox.enabled,
    ).toBe(true);
  });

  it("lists every refusal at once", () => {
    const error = refusal(
      withDocker({
        binds: ["/etc:/etc", "~/.ssh:/ssh"],
        network: "host",
        seccompProfile: "unconfined",
        env: { GITHUB_TOKEN: "x" },
      }),
    );
    expect(error.message.split("\n").filter((l) => l.startsWith("  "))).toHaveLength(5);
  });
});

/** What every sandbox gets before the config's env: a home and a name for any uid. */
const sandboxIdentity = { HOME: "/home/sandbox", USER: "sandbox", LOGNAME: "sandbox" };

describe("docker settings", () => {
  it("resolves the safe defaults into bytes and a user", () => {
    expect(plan({}).sandbox.spec?.docker).toEqual({
      image: { source: "builtin" },
      containerPrefix: "cordon",
      workdir: "/workspace",
      readOnlyRoot: true,
      tmpfs: {
        // exec said outright: without it Docker mounts the tmpfs noexec (go test, bats stubs).
        "/tmp": "rw,nosuid,nodev,exec,size=256m",
        "/var/tmp": "rw,nosuid,nodev,exec,size=64m",
        "/run": "rw,nosuid,nodev,noexec,size=16m",
        // HOME, given to the sandbox user.
        "/home/sandbox": "rw,nosuid,nodev,exec,size=512m,uid=1000,gid=1000",
      },
      network: "none",
      user: "1000:1000",
      initUser: "65534:65534",
      capDrop: ["ALL"],
      env: { ...offlineEnvironment, ...sandboxIdentity },
      memoryBytes: 1024 ** 3,
      memorySwapBytes: 1024 ** 3,
      cpus: 1,
      pidsLimit: 256,
      ulimits: [],
      dns: [],
      extraHosts: [],
      executor: "resident",
    });
  });

  it.each([
    [{ memory: "512m" }, { memoryBytes: 512 * 1024 ** 2, memorySwapBytes: 512 * 1024 ** 2 }],
    [
      { memory: "1.5GiB", memorySwap: "2g" },
      { memoryBytes: 1.5 * 1024 ** 3, memorySwapBytes: 2 * 1024 ** 3 },
    ],
    [{ memory: 268435456 }, { memoryBytes: 268435456 }],
    [
      { ulimits: { nproc: 100, nofile: { soft: 10, hard: 20 } } },
      {
        ulimits: [
          { name: "nofile", soft: 10, hard: 20 },
          { name: "nproc", soft: 100, hard: 100 },
        ],
      },
    ],
    [
      // The engine's noexec is written out where the options say neither (what explain shows).
      { tmpfs: { "/run": null, "/cache/": "size=8m", "/bin-cache": "size=8m,exec" } },
      {
        tmpfs: {
          "/tmp": "rw,nosuid,nodev,exec,size=256m",
          "/var/tmp": "rw,nosuid,nodev,exec,size=64m",
          "/cache": "size=8m,noexec",
          "/bin-cache": "size=8m,exec",
        },
      },
    ],
    [{ capDrop: ["all"] }, { capDrop: ["ALL"] }],
    [
      { runtime: "runsc", image: "my/img:1" },
      {
        runtime: "runsc",
        image: {
          source: "config",
          reference: "my/img:1",
          configKey: "agents.defaults.sandbox.docker.image",
        },
      },
    ],
  ])("%j", (docker, expected) => {
    expect(plan(withDocker(docker)).sandbox.spec?.docker).toMatchObject(expected);
  });

  it("explain says that under gVisor its kernel, not Docker's seccomp profile, is the boundary", () => {
    const text = explainPlan(plan(withDocker({ runtime: "runsc" })));
    expect(text).toContain(
      "runtime      runsc (gVisor: its user-space kernel is the boundary; Docker's seccomp profile is not applied under it)",
    );
    expect(text).toMatch(/pids limit \d+ is RLIMIT_NPROC inside gVisor/);
    expect(explainPlan(plan(withDocker({ runtime: "runc" })))).not.toContain("gVisor");
  });

  it.each([
    [{ network: "host" }, /network: "host" shares the host's network/],
    [{ network: "HOST" }, /network: "host"|network: "HOST"/],
    [{ network: "container:db" }, /joins another container's namespace/],
    [{ network: "bad name" }, /not a valid network name/],
    [{ seccompProfile: "unconfined" }, /seccompProfile: "unconfined"/],
    [{ seccompProfile: "Unconfined" }, /seccompProfile/],
    [{ seccompProfile: "relative.json" }, /absolute path/],
    [{ apparmorProfile: "unconfined" }, /apparmorProfile: "unconfined"/],
    [{ memory: "1k" }, /at least 6m/],
    [{ memory: "1g", memorySwap: "512m" }, /less than memory/],
    [{ ulimits: { nofile: { soft: 20, hard: 10 } } }, /soft limit 20 is above hard limit 10/],
    [{ workdir: "/" }, /workdir: must not be "\/"/],
    [{ workdir: "/agent" }, /overlap \/agent/],
    [{ workdir: "work" }, /absolute/],
    [{ tmpfs: { "/workspace": "size=1m" } }, /would hide the workspace/],
    [{ tmpfs: { "/": "size=1m" } }, /would hide the workspace/],
    [{ user: "a b" }, /not "uid", "uid:gid" or "auto"/],
    [{ extraHosts: ["nohost"] }, /not "hostname:ip"/],
  ])("refuses %j", (docker, message) => {
    expect(refusal(withDocker(docker)).message).toMatch(message);
  });

  it("keeps dangerous settings only with their explicit flag, and warns", () => {
    const result = plan(
      withDocker({
        network: "host",
        seccompProfile: "unconfined",
        apparmorProfile: "unconfined",
        dangerouslyAllowHostNetwork: true,
        dangerouslyAllowUnconfined: true,
      }),
    );
    expect(result.sandbox.spec?.docker).toMatchObject({
      network: "host",
      seccompProfile: "unconfined",
    });
    expect(result.warnings.join("\n")).toMatch(/host's network stack/);
    expect(result.warnings.join("\n")).toMatch(/seccomp is unconfined/);
    const joined = plan(
      withDocker({ network: "container:db", dangerouslyAllowContainerNamespaceJoin: true }),
    );
    expect(joined.sandbox.spec?.docker.network).toBe("container:db");
  });

  it("warns about weakened but allowed settings", () => {
    const warnings = plan(
      withDocker({
        network: "bridge",
        readOnlyRoot: false,
        capDrop: ["NET_RAW"],
        user: "root",
        tmpfs: { "/x": "rw" },
      }),
    ).warnings.join("\n");
    expect(warnings).toMatch(/network "bridge".*can reach the network/);
    expect(warnings).toMatch(/readOnlyRoot is false/);
    expect(warnings).toMatch(/capDrop does not include ALL/);
    expect(warnings).toMatch(/runs as root/);
    expect(warnings).toMatch(/tmpfs \/x has no size= limit/);
  });

  it('user "auto": the owner of a mounted workspace, never root', () => {
    const rw = { agents: { defaults: { sandbox: { workspaceAccess: "rw" } } } };
    expect(plan(rw, { pathOwner: () => ({ uid: 501, gid: 20 }) }).sandbox.spec?.docker.user).toBe(
      "501:20",
    );
    const rootOwned = plan(rw, { pathOwner: () => ({ uid: 0, gid: 0 }) });
    expect(rootOwned.sandbox.spec?.docker.user).toBe("1000:1000");
    expect(rootOwned.warnings.join("\n")).toMatch(/owned by root/);
    expect(plan({}, { pathOwner: () => ({ uid: 501, gid: 20 }) }).sandbox.spec?.docker.user).toBe(
      "1000:1000",
    );
    expect(
      plan(withDocker({ user: "2000:2000" }, { workspaceAccess: "rw" }), {
        pathOwner: () => ({ uid: 501, gid: 20 }),
      }).sandbox.spec?.docker.user,
    ).toBe("2000:2000");
  });

  it('user "auto" with a private copy: cordon\'s own uid when it is not root, with HOME theirs', () => {
    const asRunner = { invokingUser: { uid: 1001, gid: 118 } };
    const seeded = plan({}, asRunner).sandbox.spec?.docker;
    expect(seeded?.user).toBe("1001:118");
    expect(seeded?.tmpfs["/home/sandbox"]).toBe("rw,nosuid,nodev,exec,size=512m,uid=1001,gid=118");
    const ro = { agents: { defaults: { sandbox: { workspaceAccess: "ro" } } } };
    expect(
      plan(ro, { ...asRunner, pathOwner: () => ({ uid: 501, gid: 20 }) }).sandbox.spec?.docker.user,
    ).toBe("1001:118");
    // rw mounts the user's own files: their owner still decides.
    const rw = { agents: { defaults: { sandbox: { workspaceAccess: "rw" } } } };
    expect(
      plan(rw, { ...asRunner, pathOwner: () => ({ uid: 501, gid: 20 }) }).sandbox.spec?.docker.user,
    ).toBe("501:20");
    // Root hands its copy over to 1000:1000, as before.
    expect(plan({}, { invokingUser: { uid: 0, gid: 0 } }).sandbox.spec?.docker.user).toBe(
      "1000:1000",
    );
    // An explicit user is taken as written; HOME is still made theirs.
    const explicit = plan(withDocker({ user: "2000" }), asRunner).sandbox.spec?.docker;
    expect(explicit?.user).toBe("2000");
    expect(explicit?.tmpfs["/home/sandbox"]).toMatch(/,uid=2000,gid=2000$/);
    // A user named in the image has no uid the policy can know: HOME is writable for any user.
    const namedPlan = plan(withDocker({ user: "node" }), asRunner);
    const named = namedPlan.sandbox.spec?.docker;
    expect(named?.user).toBe("node");
    expect(named?.tmpfs["/home/sandbox"]).toBe("rw,nosuid,nodev,exec,size=512m,mode=1777");
    expect(namedPlan.warnings).toContainEqual(
      expect.stringMatching(/docker\.user="node" is a name.*give the uid/),
    );
    expect(
      plan(withDocker({ user: "root" }), asRunner).sandbox.spec?.docker.tmpfs["/home/sandbox"],
    ).toBe("rw,nosuid,nodev,exec,size=512m");
  });

  it("runs init and the keep-alive as nobody, never as the agent's own uid", () => {
    const initUser = (user: string) =>
      plan(withDocker({ user }), { invokingUser: { uid: 1001, gid: 1001 } }).sandbox.spec?.docker
        .initUser;
    expect(plan({}, { invokingUser: { uid: 1001, gid: 118 } }).sandbox.spec?.docker).toMatchObject({
      user: "1001:118",
      initUser: "65534:65534",
    });
    for (const user of ["1000:1000", "0", "root", "node", "65533"]) {
      expect(initUser(user), user).toBe("65534:65534");
    }
    // An agent that is nobody itself gets the uid below for init.
    for (const user of ["65534", "65534:65534", "065534:1000", "nobody", "nobody:nogroup"]) {
      expect(initUser(user), user).toBe("65533:65533");
    }
  });

  it("leaves a HOME tmpfs the config gives an owner, and a removed one removed", () => {
    const asRunner = { invokingUser: { uid: 1001, gid: 1001 } };
    const owned = withDocker({ tmpfs: { "/home/sandbox": "rw,size=8m,uid=7,exec" } });
    expect(plan(owned, asRunner).sandbox.spec?.docker.tmpfs["/home/sandbox"]).toBe(
      "rw,size=8m,uid=7,exec",
    );
    // Without exec the engine mounts it noexec, and the plan says so.
    const moded = withDocker({ tmpfs: { "/home/sandbox": "rw,size=8m,mode=700" } });
    expect(plan(moded, asRunner).sandbox.spec?.docker.tmpfs["/home/sandbox"]).toBe(
      "rw,size=8m,mode=700,noexec",
    );
    const removed = withDocker({ tmpfs: { "/home/sandbox": null } });
    expect(plan(removed, asRunner).sandbox.spec?.docker.tmpfs).not.toHaveProperty("/home/sandbox");
  });
});

describe("the sandbox environment", () => {
  it("passes only declared variables", () => {
    expect(
      plan(
        withDocker({
          env: {
            LANG: "C.UTF-8",
            CI: "1",
            GIT_AUTHOR_NAME: "bot",
            SSL_CERT_FILE: "/c.pem",
            PATH: "/bin",
          },
        }),
      ).sandbox.spec?.docker.env,
    ).toEqual({
      ...offlineEnvironment,
      ...sandboxIdentity,
      LANG: "C.UTF-8",
      CI: "1",
      GIT_AUTHOR_NAME: "bot",
      SSL_CERT_FILE: "/c.pem",
      PATH: "/bin",
    });
  });

  it("tells a sandbox with no network it is offline (installs fail in seconds); one with a network is not told", () => {
    const offline = plan(withDocker({ env: { NPM_CONFIG_OFFLINE: "false" } })).sandbox.spec;
    expect(offline?.docker.env).toEqual({
      ...offlineEnvironment,
      ...sandboxIdentity,
      NPM_CONFIG_OFFLINE: "false",
    });
    expect(offline?.docker.env["PIP_NO_INDEX"]).toBe("1");
    const online = plan(withDocker({ network: "bridge", env: { CI: "1" } })).sandbox.spec;
    expect(online?.docker.env).toEqual({ ...sandboxIdentity, CI: "1" });
    // An allowlist is a network too: npm must be free to reach the allowed registry.
    const allowlisted = plan(withDocker({}, { egress: { allow: ["registry.npmjs.org"] } })).sandbox
      .spec;
    expect(allowlisted?.egress?.allow).toEqual(["registry.npmjs.org"]);
    for (const name of Object.keys(offlineEnvironment)) {
      expect(allowlisted?.docker.env).not.toHaveProperty(name);
    }
  });

  it.each([
    "ANTHROPIC_API_KEY",
    "OPENAI_APIKEY",
    "GITHUB_TOKEN",
    "gh_token",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "SSH_AUTH_SOCK",
    "DOCKER_HOST",
    "KUBECONFIG",
    "npm_config__auth",
    "DB_PASSWORD",
    "MY_SECRET",
    "SIGNING_KEY",
    "GOOGLE_APPLICATION_CREDENTIALS",
    "MYTOKEN",
  ])("refuses %s", (name) => {
    expect(refusal(withDocker({ env: { [name]: "x" } })).message).toMatch(
      new RegExp(
        `docker\\.env\\.${name}: ${name} (looks like a credential|reaches a host service)`,
      ),
    );
  });

  it("passes a credential-like name only when listed, with a warning, and never prints it", () => {
    const result = plan(
      withDocker({
        env: { NPM_TOKEN: "s3cret", LANG: "C" },
        dangerouslyAllowEnvNames: ["NPM_TOKEN"],
      }),
    );
    expect(result.sandbox.spec?.docker.env).toEqual({
      ...offlineEnvironment,
      ...sandboxIdentity,
      NPM_TOKEN: "s3cret",
      LANG: "C",
    });
    expect(result.warnings.join("\n")).toMatch(/NPM_TOKEN is passed into the sandbox/);
    const printed = redactPlanSecrets(result);
    expect(printed.sandbox.spec?.docker.env).toEqual({
      ...offlineEnvironment,
      ...sandboxIdentity,
      NPM_TOKEN: "<redacted>",
      LANG: "C",
    });
    expect(result.sandbox.spec?.docker.env["NPM_TOKEN"]).toBe("s3cret");
    expect(JSON.stringify(printed)).not.toContain("s3cret");
    expect(explainPlan(result)).not.toContain("s3cret");
  });

  it("refuses NUL bytes and bad names even in a config built in code", () => {
    const config = parseConfig({});
    config.agents.defaults.sandbox.docker.env = { "A=B": "1", C: "x\0y" };
    const run = () =>
      planRun({
        config,
        stateDir,
        homeDir: home,
        realpath: fakeRealpath(),
        entryKind: fakeEntryKind(),
      });
    expect(run).toThrow(/env\.A=B: an environment variable name/);
    expect(run).toThrow(/env\.C: contains a NUL byte/);
  });

  it("drops variables set to null by an agent", () => {
    const result = plan({
      agents: {
        defaults: { sandbox: { scope: "agent", docker: { env: { A: "1", B: "2" } } } },
        list: [{ id: "a", sandbox: { docker: { env: { B: null } } } }],
      },
    });
    expect(result.sandbox.spec?.docker.env).toEqual({
      ...offlineEnvironment,
      ...sandboxIdentity,
      A: "1",
    });
  });
});

describe("scope shared", () => {
  it("ignores per-agent docker settings that differ, with a warning naming them", () => {
    const result = plan({
      agents: {
        defaults: { sandbox: { scope: "shared", docker: { pidsLimit: 100 } } },
        list: [
          { id: "ops", sandbox: { docker: { pidsLimit: 999, memory: "2g", network: "none" } } },
        ],
      },
    });
    expect(result.sandbox.spec?.docker).toMatchObject({ pidsLimit: 100, memoryBytes: 1024 ** 3 });
    expect(result.warnings).toEqual([
      'scope "shared" ignores per-agent docker settings: agents.list[0].sandbox.docker.memory, agents.list[0].sandbox.docker.pidsLimit (set them in agents.defaults.sandbox.docker, or give the agent scope "agent")',
    ]);
  });

  it("keeps per-agent docker settings under scope agent", () => {
    const result = plan({
      agents: { list: [{ id: "ops", sandbox: { scope: "agent", docker: { pidsLimit: 999 } } }] },
    });
    expect(result.sandbox.spec?.docker.pidsLimit).toBe(999);
    expect(result.warnings).toEqual([]);
  });
});

describe("the config hash", () => {
  it("ignores key order and keeps array order", () => {
    expect(canonicalJson({ b: 1, a: { d: [2, 1], c: undefined } })).toBe('{"a":{"d":[2,1]},"b":1}');
    expect(hashOf({ a: 1, b: 2 })).toBe(hashOf({ b: 2, a: 1 }));
    expect(hashOf([1, 2])).not.toBe(hashOf([2, 1]));
  });

  it("is stable across key order in the config and changes with what shapes the container", () => {
    const base = plan(withDocker({ env: { A: "1", B: "2" }, dns: ["1.1.1.1", "8.8.8.8"] })).sandbox
      .spec?.configHash;
    expect(
      plan(withDocker({ dns: ["1.1.1.1", "8.8.8.8"], env: { B: "2", A: "1" } })).sandbox.spec
        ?.configHash,
    ).toBe(base);
    expect(
      plan(withDocker({ env: { A: "1", B: "2" }, dns: ["8.8.8.8", "1.1.1.1"] })).sandbox.spec
        ?.configHash,
    ).not.toBe(base);
    expect(
      plan(withDocker({ env: { A: "1", B: "3" }, dns: ["1.1.1.1", "8.8.8.8"] })).sandbox.spec
        ?.configHash,
    ).not.toBe(base);
    expect(base).toMatch(/^[0-9a-f]{16}$/);
  });

  it("does not change with tool settings, which do not shape the container", () => {
    expect(plan({ tools: { deny: ["exec"] } }).sandbox.spec?.configHash).toBe(
      plan({}).sandbox.spec?.configHash,
    );
  });
});

describe("prune and exec settings", () => {
  it("converts minutes, hours and days to milliseconds", () => {
    expect(plan({}).sandbox.prune).toEqual({
      stopIdleMs: 30 * 60_000,
      idleMs: 24 * 3_600_000,
      maxAgeMs: 7 * 86_400_000,
    });
    expect(
      plan({
        agents: { list: [{ id: "a", sandbox: { prune: { idleHours: 0.5, stopIdleMinutes: 0 } } }] },
      }).sandbox.prune,
    ).toEqual({ stopIdleMs: 0, idleMs: 1_800_000, maxAgeMs: 7 * 86_400_000 });
  });

  it("layers exec settings: global, agents.defaults, agent", () => {
    expect(plan({}).tools.exec).toEqual({ timeoutSec: 300 });
    expect(
      plan({
        tools: { exec: { timeoutSec: 60, maxOutputBytes: 100_000 } },
        agents: { list: [{ id: "a", tools: { exec: { timeoutSec: 30 } } }] },
      }).tools.exec,
    ).toEqual({ timeoutSec: 30, maxOutputBytes: 100_000 });
  });
});

describe("explainPlan", () => {
  it("shows the decision, the container, the mounts, the tools and the warnings", () => {
    const text = explainPlan(
      plan(
        {
          tools: { deny: ["process"] },
          agents: {
            list: [
              {
                id: "ops",
                sandbox: { scope: "agent", workspaceAccess: "ro", docker: { network: "bridge" } },
              },
            ],
          },
        },
        { sessionKey: "deploy" },
      ),
    );
    expect(text).toContain("agent     ops");
    expect(text).toContain("session   agent:ops:deploy");
    expect(text).toMatch(/sandbox {3}yes — agents\.defaults\.sandbox\.mode is "all"/);
    expect(text).toMatch(/container cordon-proj-agent-ops-[0-9a-f]{12}/);
    expect(text).toMatch(/scope key {4}agent:ops@[0-9a-f]{16}\n/);
    expect(text).toContain("  project      /home/u/proj (hashed into the scope key");
    expect(text).toMatch(/\/agent +← \/home\/u\/proj {2}ro {2}\[agent-workspace\]/);
    expect(text).toMatch(/deny {2}process +global +tools\.deny: denied by "process"/);
    expect(text).toMatch(/limits +memory 1 GiB, memory\+swap 1 GiB, cpus 1, pids 256/);
    expect(text).toMatch(/! network "bridge"/);
  });

  it("says plainly when nothing is sandboxed", () => {
    const text = explainPlan(plan(mode("off")));
    expect(text).toMatch(/sandbox {3}NO — .*no isolation/);
    expect(text).not.toMatch(/^container/m);
  });
});

describe("the warm pool in the plan (sandbox.pool)", () => {
  const pooled = (sandbox: Record<string, unknown>) =>
    plan({ agents: { defaults: { sandbox: { pool: { size: 2 }, ...sandbox } } } });

  it("carries the size beside the spec, out of the config hash", () => {
    const withPool = pooled({});
    expect(withPool.sandbox.pool).toEqual({ size: 2 });
    expect(plan({}).sandbox.pool).toEqual({ size: 0 });
    expect(withPool.sandbox.spec?.configHash).toBe(plan({}).sandbox.spec?.configHash);
  });

  it("explains the pool, or why this sandbox is made without it", () => {
    expect(explainPlan(plan({}))).toMatch(/pool +none \(sandbox\.pool\.size 0/);
    expect(explainPlan(pooled({}))).toMatch(
      /pool +2 started containers of shape [0-9a-f]{16} wait for new sandboxes; a member's seeded copy is taken only while the workspace is unchanged/,
    );
    expect(explainPlan(pooled({ egress: { allow: ["registry.npmjs.org"] } }))).toMatch(
      /pool +not used: its network is by allowlist \(sandbox\.egress\)/,
    );
  });
});

describe("the agent runtime in the plan (agents.*.runtime, --runtime)", () => {
  it("takes --runtime, else the agent's own, else the defaults', else cordon's loop, naming the key", () => {
    const config = {
      agents: {
        defaults: { runtime: { command: ["node", "agent.js"] } },
        list: [{ id: "cc", runtime: "claude-code" }, { id: "cmd" }],
      },
    };
    expect(plan(config, { agentId: "cc" }).agent.runtime).toEqual({
      name: "claude-code",
      configKey: "agents.list[0].runtime",
      gateway: true,
    });
    expect(plan(config, { agentId: "cmd" }).agent.runtime).toEqual({
      name: "command",
      configKey: "agents.defaults.runtime",
      command: ["node", "agent.js"],
      prompt: "argument",
    });
    expect(plan(config, { agentId: "cc", runtime: "cordon" }).agent.runtime).toEqual({
      name: "cordon",
      configKey: "--runtime",
    });
    expect(explainPlan(plan({})).split("\n")).toContain(
      "runtime   cordon's own agent loop (built-in default; set agents.defaults.runtime)",
    );
  });

  it("claude-code, sandboxed, reaches the model through the gateway and runs from its agent image", () => {
    const result = plan({}, { runtime: "claude-code" });
    expect(result.sandbox.spec?.egress).toMatchObject({ allow: [] });
    expect(result.sandbox.spec?.docker.image).toEqual({
      source: "runtime",
      runtime: "claude-code",
    });
    expect(explainPlan(result)).toContain(
      "runtime   claude-code in the sandbox (--runtime); its model calls go through cordon's model gateway",
    );
    // Not sandboxed, it has no gateway: explain says the run will fail, and why.
    const host = plan(mode("off"), { runtime: "claude-code" });
    expect(host.agent.runtime).toMatchObject({ gateway: false });
    expect(explainPlan(host)).toMatch(/runtime +claude-code .*no model gateway to call/);
  });
});
