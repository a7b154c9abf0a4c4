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
    ? "rerun setup with CORDON_RUNTIME=runsc (it installs runsc and registers it with runtime flags that start here); `cordon help gvisor`"
    : `register the runtime ${runtime} with the engine (dockerd --add-runtime or daemon.json "runtimes")`;
  const containers = engine.containers;
  let container: string | undefined;
  try {
    container = await containers.create({
      Image: image,
      Entrypoint: ["true"],
      Cmd: [],
      Labels: { "cordon.probe": "runtime" },
      HostConfig: { Runtime: runtime, NetworkMode: "none", AutoRemove: false },
    });
    // Unnamed, so never a name conflict.
    if (container === undefined) throw new Error("the engine created no container");
  } catch (error) {
    throw new SandboxStartError(`the engine cannot create a container under ${runtime}`, {
      fix,
      cause: toSandboxError(error, `create a container under ${runtime}`),
    });
  }
  try {
    await containers.start(container);
    const status = await containers.wait(container);
    if (status !== 0) {
      throw new Error(`\`true\` exited with status ${status}`);
    }
  } catch (error) {
    const detail = error instanceof Error ? error.message : String(error);
    throw new SandboxStartError(`a container under ${runtime} does not start: ${detail}`, {
      fix,
    });
  } finally {
    await containers.remove(container).catch(() => undefined);
  }
}
