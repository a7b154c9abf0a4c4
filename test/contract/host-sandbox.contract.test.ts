import { mkdir, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";

import { afterAll, beforeAll } from "vitest";

import { HostSandbox } from "../../src/sandbox/index.js";
import { describeSandboxContract } from "../support/sandbox-contract.js";

let base: string;
let sandbox: HostSandbox;

beforeAll(async () => {
  base = await mkdtemp(path.join(tmpdir(), "cordon-contract-host-"));
  const root = path.join(base, "workspace");
  await mkdir(root);
  sandbox = await HostSandbox.create({ root, stateDirectory: path.join(base, "state") });
});

afterAll(async () => {
  await rm(base, { recursive: true, force: true });
});

describeSandboxContract("HostSandbox", { sandbox: () => sandbox, runsCommands: true });
