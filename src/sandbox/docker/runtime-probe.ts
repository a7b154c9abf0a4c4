import { SandboxStartError } from "../../common/index.js";
import { toSandboxError } from "./docker-errors.js";
import type { DockerEngine } from "./engine.js";
import { isGvisorRuntime } from "./gvisor.js";

/**
 * Proves that the engine runs containers under `runtime`: one throwaway container of `image` under
 * it, with no network, that runs `true` and is removed. Registered is not enough: a runtime the
 * engine lists can still fail every start (gVisor's network set-up, a missing binary).
 */
export async function probeRuntime(
  engine: DockerEngine,
  runtime: string,
  image: string,
): Promise<void> {
  const fix = isGvisorRuntime(runtime)
    ? "rerun setup with CORDON_RUNTIME=runsc (it installs runsc and registers it with runtime flags that start here); docs/gvisor.md"
    : `register the runtime ${runtime} with the engine (dockerd --add-runtime or daemon.json "runtimes")`;
  let container;
  try {
    container = await engine.client.createContainer({
      Image: image,
      Entrypoint: ["true"],
      Cmd: [],
      Labels: { "cordon.probe": "runtime" },
      HostConfig: { Runtime: runtime, NetworkMode: "none", AutoRemove: false },
    });
  } catch (error) {
    throw new SandboxStartError(`the engine cannot create a container under ${runtime}`, {
      fix,
      cause: toSandboxError(error, `create a container under ${runtime}`),
    });
  }
  try {
    await container.start();
    const result = (await container.wait()) as { StatusCode: number };
    if (result.StatusCode !== 0) {
      throw new Error(`\`true\` exited with status ${result.StatusCode}`);
    }
  } catch (error) {
    const detail = error instanceof Error ? error.message : String(error);
    throw new SandboxStartError(`a container under ${runtime} does not start: ${detail}`, {
      fix,
    });
  } finally {
    await container.remove({ force: true }).catch(() => undefined);
  }
}
