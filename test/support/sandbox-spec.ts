import { configDefaults, sandboxHomeDirectory } from "../../src/config/index.js";
import { initUserFor } from "../../src/policy/index.js";
import type { DockerSettings, SandboxSpec } from "../../src/sandbox/index.js";

/**
 * The default tmpfs mounts but HOME (which the policy gives to the sandbox user), taken from the
 * config's defaults so a container test attacks the mounts users get.
 */
function defaultTmpfs(): Record<string, string> {
  return Object.fromEntries(
    Object.entries(configDefaults.docker.tmpfs).flatMap(([target, options]) =>
      options === null || target === sandboxHomeDirectory ? [] : [[target, options]],
    ),
  );
}

/**
 * The container runtime of the tests' sandboxes: CORDON_TEST_RUNTIME=runsc runs them under gVisor
 * (the second CI pass, scripts/test-gvisor.sh); unset, the engine's default.
 */
export const testRuntime = process.env["CORDON_TEST_RUNTIME"] || undefined;

/** DESIGN.md §5 defaults, spelled out for tests that need a spec without the policy layer. */
export function hardenedDockerSettings(overrides: Partial<DockerSettings> = {}): DockerSettings {
  const user = overrides.user ?? "1000:1000";
  return {
    ...(testRuntime ? { runtime: testRuntime } : {}),
    image: { source: "builtin" },
    containerPrefix: "cordon",
    workdir: "/workspace",
    readOnlyRoot: true,
    tmpfs: defaultTmpfs(),
    network: "none",
    user,
    initUser: initUserFor(user),
    capDrop: ["ALL"],
    env: {},
    memoryBytes: 1024 ** 3,
    memorySwapBytes: 1024 ** 3,
    cpus: 1,
    pidsLimit: 256,
    ulimits: [],
    dns: [],
    extraHosts: [],
    executor: "resident",
    ...overrides,
  };
}

export function testSandboxSpec(
  name: string,
  overrides: { docker?: Partial<DockerSettings>; spec?: Partial<SandboxSpec> } = {},
): SandboxSpec {
  return {
    scope: "session",
    scopeKey: `session:test:${name}`,
    containerName: `cordon-test-${name}-${process.pid}-${Date.now().toString(36)}`,
    agentId: "test",
    sessionKey: `agent:test:${name}`,
    workspaceAccess: "none",
    agentWorkspace: "/nonexistent",
    seed: false,
    mounts: [],
    docker: hardenedDockerSettings(overrides.docker),
    configHash: "test",
    ...overrides.spec,
  };
}
