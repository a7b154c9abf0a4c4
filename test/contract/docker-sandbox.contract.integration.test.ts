import { afterAll, beforeAll, describe } from "vitest";

import type { DockerSandbox } from "../../src/sandbox/index.js";
import { describeSandboxContract } from "../support/sandbox-contract.js";
import { startDockerToolSandbox, type DockerToolSandbox } from "../support/tool-runner.js";

// A hardened container built from the production container options, once per transport: the
// resident executor (the default) and one Docker exec per call; and with /workspace in a Docker
// volume (`sandbox.workspaceStorage: "volume"`) as well as bound from the host. All must keep the
// same contract, under runc and under gVisor (scripts/test-gvisor.sh).
const variants = [
  { executor: "resident", storage: "host" },
  { executor: "exec", storage: "host" },
  { executor: "resident", storage: "volume" },
  { executor: "exec", storage: "volume" },
] as const;
for (const { executor, storage } of variants) {
  const label = storage === "host" ? executor : `${executor}, workspace in a volume`;
  describe(`executor ${label}`, () => {
    let box: DockerToolSandbox | undefined;
    let sandbox: DockerSandbox;

    beforeAll(async () => {
      box = await startDockerToolSandbox({
        name: `contract-${executor}-${storage}`,
        docker: { executor },
        workspaceStorage: storage,
      });
      sandbox = box.sandbox;
    });

    afterAll(async () => {
      await box?.dispose();
    });

    describeSandboxContract(`DockerSandbox (${label})`, {
      sandbox: () => sandbox,
      runsCommands: true,
    });
  });
}
