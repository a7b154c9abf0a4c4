export { HostSandbox, type HostSandboxOptions } from "./host-sandbox.js";
