import { readFile } from "node:fs/promises";

import { SandboxStartError } from "../../common/index.js";
import type { SandboxSpec } from "../spec.js";

/**
 * The seccomp profile a spec names, as the JSON text the Engine API wants in `SecurityOpt`
 * (`seccomp=<json>`: unlike the docker CLI, the API takes the profile itself, not a path).
 * Undefined for the engine's default profile.
 */
export async function readSeccompProfile(spec: SandboxSpec): Promise<string | undefined> {
  const profile = spec.docker.seccompProfile;
  if (!profile || profile === "default") return undefined;
  let text: string;
  try {
    text = await readFile(profile, "utf8");
  } catch (error) {
    throw new SandboxStartError(`cannot read the seccomp profile ${profile}`, {
      cause: error,
      fix: 'point sandbox.docker.seccompProfile at a readable JSON profile, or use "default"',
    });
  }
  try {
    // Compact, and proof that it is JSON before the engine reports it less clearly.
    return JSON.stringify(JSON.parse(text));
  } catch (error) {
    throw new SandboxStartError(`the seccomp profile ${profile} is not valid JSON`, {
      cause: error,
      fix: "give a Docker seccomp profile (JSON), e.g. a copy of moby's default.json with changes",
    });
  }
}
