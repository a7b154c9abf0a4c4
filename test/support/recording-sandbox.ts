import Docker from "dockerode";

import type { ManagedContainer, Sandbox } from "../../src/sandbox/index.js";
import { execIn, type ExecOutput } from "./docker.js";

/**
 * A stand-in for `DockerSandbox` in manager tests: it records the container it was made for and
 * can run a command there as the sandbox user (through the raw API). Every other `Sandbox`
 * method fails: manager tests need nothing more.
 */
export interface RecordingSandbox extends Sandbox {
  readonly container: ManagedContainer;
  run(script: string): Promise<ExecOutput>;
}

export function createRecordingSandbox(container: ManagedContainer): RecordingSandbox {
  const docker = new Docker();
  const unsupported = (): never => {
    throw new Error("not supported by the recording sandbox of the manager tests");
  };
  return {
    id: container.containerName,
    kind: "docker",
    workdir: container.workdir,
    container,
    run: (script) =>
      execIn(docker.getContainer(container.containerId), ["bash", "-c", script], {
        user: container.user,
      }),
    exec: unsupported,
    files: {
      readFile: unsupported,
      writeFile: unsupported,
      stat: unsupported,
      list: unsupported,
      mkdir: unsupported,
      remove: unsupported,
      rename: unsupported,
    },
    processes: {
      start: unsupported,
      list: unsupported,
      poll: unsupported,
      log: unsupported,
      write: unsupported,
      kill: unsupported,
    },
  };
}

/** The recording sandbox behind a lease (the manager's `createSandbox` made it). */
export function recorded(sandbox: Sandbox): RecordingSandbox {
  return sandbox as RecordingSandbox;
}
