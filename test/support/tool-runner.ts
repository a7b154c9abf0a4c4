import { chown, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";

import type Docker from "dockerode";
import { expect } from "vitest";

import { createSilentLogger, type Logger } from "../../src/common/index.js";
import { DockerEngine, DockerSandbox, type Sandbox } from "../../src/sandbox/index.js";
import type { DockerSettings, MountSpec } from "../../src/sandbox/index.js";
import { createContainerOptions } from "../../src/sandbox/docker/container-options.js";
import {
  ensureWorkspaceVolumes,
  removeWorkspaceVolumes,
  workspaceVolumeMount,
} from "../../src/sandbox/docker/workspace-volumes.js";
import {
  builtinTools,
  createToolset,
  type BuiltinToolsOptions,
  type Toolset,
  type ToolResult,
} from "../../src/tools/index.js";
import {
  dockerClient,
  removeContainer,
  requireSandboxImage,
  testExecutorVolume,
  testLabel,
} from "./docker.js";
import { testSandboxSpec } from "./sandbox-spec.js";

/**
 * Runs tools the way the runner does: one `createToolset` over the built-in tools (so input
 * validation, dispatch and the error-to-result mapping are the real ones), every call with
 * `{ sandbox, signal, logger, toolCallId }`. One runner is one tool session: the stale-read
 * state is shared by its calls, as it is within one agent run.
 */
export interface ToolRunner {
  readonly sandbox: Sandbox;
  readonly toolset: Toolset;
  /** The raw result of one call. */
  call(name: string, input: unknown, options?: { signal?: AbortSignal }): Promise<ToolResult>;
  /** The text of a call that must succeed (fails the test with the text otherwise). */
  ok(name: string, input: unknown): Promise<string>;
  /** The text of a call that must fail (an `isError` result). */
  fail(name: string, input: unknown): Promise<string>;
}

export interface CreateToolRunnerOptions {
  sandbox: Sandbox;
  tools?: BuiltinToolsOptions | undefined;
  logger?: Logger | undefined;
}

export function createToolRunner(options: CreateToolRunnerOptions): ToolRunner {
  const tools = builtinTools(options.tools);
  const toolset = createToolset({ tools, allowed: tools.map((tool) => tool.name) });
  const logger = options.logger ?? createSilentLogger();
  let calls = 0;
  const call: ToolRunner["call"] = (name, input, callOptions = {}) =>
    toolset.call(name, input, {
      sandbox: options.sandbox,
      signal: callOptions.signal ?? new AbortController().signal,
      logger,
      toolCallId: `toolu_test_${++calls}`,
    });
  return {
    sandbox: options.sandbox,
    toolset,
    call,
    async ok(name, input) {
      const result = await call(name, input);
      const text = resultText(result);
      expect(
        result.isError,
        `${name} ${JSON.stringify(input)} failed in ${options.sandbox.id}:\n${text}`,
      ).toBe(false);
      return text;
    },
    async fail(name, input) {
      const result = await call(name, input);
      const text = resultText(result);
      expect(
        result.isError,
        `${name} ${JSON.stringify(input)} succeeded in ${options.sandbox.id}:\n${text}`,
      ).toBe(true);
      return text;
    },
  };
}

/** The text parts of a result, an image shown as `[image TYPE]`. */
export function resultText(result: ToolResult): string {
  return result.content
    .map((part) => (part.type === "text" ? part.text : `[image ${part.mediaType}]`))
    .join("\n");
}

/** One hardened test container with a DockerSandbox over it, for a whole test file. */
export interface DockerToolSandbox {
  sandbox: DockerSandbox;
  container: Docker.Container;
  /** The host directory bound at /workspace (owned by uid 1000). */
  hostWorkspace: string;
  /** Removes the container and the host directories it made. */
  dispose(): Promise<void>;
}

/**
 * Starts a container the way the manager would (`createContainerOptions` over a hardened test
 * spec: read-only root, no network, no capabilities, uid 1000), with a writable host workspace at
 * /workspace and any `mounts` given, labelled with `testLabel`. On failure what was made is
 * removed before the error is rethrown.
 */
export async function startDockerToolSandbox(options: {
  name: string;
  mounts?: MountSpec[] | undefined;
  /** Container settings over the hardened test defaults (e.g. `executor: "exec"`). */
  docker?: Partial<DockerSettings> | undefined;
  /** The executor binary whose volume is mounted (undefined: none; absent: cordon's). */
  executorBinary?: string | undefined;
  /**
   * Where /workspace lives: "host" (default) the host directory below, bound; "volume" a Docker
   * volume made by the manager's own code (workspace-volumes.ts), the host directory unused.
   */
  workspaceStorage?: "host" | "volume" | undefined;
  /**
   * Another engine than the local one (the second engine of test/support/second-engine.ts): the
   * environment cordon resolves it from (DOCKER_HOST …), and a client of it for the test's own
   * calls. Its copy must be in a volume: the engine does not see this host's directory.
   */
  engine?: { env: NodeJS.ProcessEnv; client: Docker } | undefined;
}): Promise<DockerToolSandbox> {
  const image = await requireSandboxImage();
  const docker = options.engine?.client ?? dockerClient();
  const engine = options.engine ? DockerEngine.fromEnv(options.engine.env) : new DockerEngine();
  const hostWorkspace = await mkdtemp(path.join(tmpdir(), `cordon-${options.name}-ws-`));
  let container: Docker.Container | undefined;
  let volumeOf: string | undefined;
  const dispose = async (): Promise<void> => {
    await removeContainer(container);
    if (volumeOf) await removeWorkspaceVolumes(engine.volumes, volumeOf, hostWorkspace);
    await rm(hostWorkspace, { recursive: true, force: true });
  };
  try {
    await chown(hostWorkspace, 1000, 1000);
    const spec = testSandboxSpec(options.name, {
      docker: { memoryBytes: 512 * 1024 ** 2, memorySwapBytes: 512 * 1024 ** 2, ...options.docker },
      spec: {
        mounts: [
          { source: hostWorkspace, target: "/workspace", readOnly: false, role: "workspace" },
          ...(options.mounts ?? []),
        ],
        ...(options.workspaceStorage === "volume"
          ? { privateWorkspace: path.join(hostWorkspace, "copy"), workspaceStorage: "volume" }
          : {}),
      },
    });
    if (options.workspaceStorage === "volume") {
      volumeOf = spec.containerName;
      // The test's directory stands for the state directory: it labels the volume.
      await ensureWorkspaceVolumes(spec, {
        containers: engine.containers,
        volumes: engine.volumes,
        stateDirectory: hostWorkspace,
        image,
        warnings: [],
      });
    }
    container = await docker.createContainer(
      createContainerOptions({
        spec,
        image,
        createdAt: new Date().toISOString(),
        extraLabels: testLabel,
        workspaceVolume: volumeOf ? workspaceVolumeMount(spec) : undefined,
        executorVolume:
          "executorBinary" in options
            ? await testExecutorVolume(image, { binary: options.executorBinary, engine })
            : await testExecutorVolume(image, { engine }),
      }),
    );
    await container.start();
    const sandbox = new DockerSandbox({
      engine,
      containerId: container.id,
      containerName: spec.containerName,
      workdir: "/workspace",
      user: "1000:1000",
      executor: spec.docker.executor,
    });
    return { sandbox, container, hostWorkspace, dispose };
  } catch (error) {
    await dispose();
    throw error;
  }
}
