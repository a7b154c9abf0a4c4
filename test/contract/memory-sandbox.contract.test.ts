import { MemorySandbox } from "../../src/tools/testing/index.js";
import { describeSandboxContract } from "../support/sandbox-contract.js";

// The unit tests' fake: its exec is scripted, so only the file contract applies.
const sandbox = new MemorySandbox();
describeSandboxContract("MemorySandbox", { sandbox: () => sandbox, runsCommands: false });
