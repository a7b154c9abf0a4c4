import { afterAll, beforeAll, describe } from "vitest";

import type { DockerSandbox } from "../../src/sandbox/index.js";
import { describeSandboxContract } from "../support/sandbox-contract.js";
import { startDockerToolSandbox, type DockerToolSandbox } from "../support/tool-runner.js";

// A hardened container built from the production container options, once per transport: the
// resident executor (the default) and one Docker exec per call. Both must keep the same contract,
// under runc and under gVisor (scripts/test-gvisor.sh).
const executors = ["resident", "exec"] as const;
for (const executor of executors) {
  describe(`executor ${executor}`, () => {
    let box: DockerToolSandbox | undefined;
    let sandbox: DockerSandbox;

    beforeAll(async () => {
      box = await startDockerToolSandbox({ name: `contract-${executor}`, docker: { executor } });
      sandbox = box.sandbox;
    });

    afterAll(async () => {
      await box?.dispose();
    });

    describeSandboxContract(`DockerSandbox (${executor})`, {
      sandbox: () => sandbox,
      runsCommands: true,
    });
  });
}
