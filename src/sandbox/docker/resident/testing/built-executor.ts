import { execFile, spawn } from "node:child_process";
import path from "node:path";
import { promisify } from "node:util";

import { packageRoot } from "../../../../common/index.js";
import { residentExecutorBinary } from "../executor-binary.js";
import { FrameReader, payloadOf, protocolGreeting, response } from "../protocol.js";

const run = promisify(execFile);
const buildScript = "scripts/build-executor.sh";

/**
 * The executor binary for tests that run it (channels, port forwarding, the poll loop): built now
 * when its source changed since the last build (`scripts/build-executor.sh` skips an up-to-date
 * one, and builds running at once never share a file), then checked to be built from this
 * source and to greet with this source's protocol. A test that cannot have it fails with an
 * error naming the fix — never a skip, and never a confusing failure against a stale binary.
 */
export async function builtExecutorBinary(): Promise<string> {
  const script = path.join(packageRoot(), buildScript);
  const fix = `run \`bash ${buildScript}\` (it needs gcc and libc6-dev) and fix what it prints`;
  let said: string;
  try {
    // Says why it built nothing (no compiler) on stderr, and exits 0 then.
    said = (await run("bash", [script])).stderr.trim();
  } catch (error) {
    const stderr = (error as { stderr?: string }).stderr?.trim();
    throw new Error(`building the resident executor failed: ${stderr || String(error)}; ${fix}`, {
      cause: error,
    });
  }
  const stale = await run("bash", [script, "--check"]).then(
    () => undefined,
    (error: unknown) => (error as { stderr?: string }).stderr?.trim() || String(error),
  );
  const binary = residentExecutorBinary();
  if (stale !== undefined || binary === undefined) {
    const why = [stale ?? "the resident executor is not built", said].filter(Boolean);
    throw new Error(`${why.join("; ")}; ${fix}`);
  }
  await assertSpeaksThisProtocol(binary);
  return binary;
}

/**
 * Fails unless `binary` greets with this source's `protocolGreeting`: a binary built from an
 * older executor.c (a checkout that moved on, a dist/ copied from elsewhere) would otherwise fail
 * the tests that use it with no word of why.
 */
export async function assertSpeaksThisProtocol(binary: string): Promise<void> {
  const greeting = await greetingOf(binary);
  if (greeting !== protocolGreeting) {
    throw new Error(
      `the resident executor ${binary} greets with "${greeting}", this source with "${protocolGreeting}": it is stale; run \`bash ${buildScript}\` (it needs gcc and libc6-dev) and fix what it prints`,
    );
  }
}

/** What the binary says first (its hello frame's payload), or why it said nothing. */
async function greetingOf(binary: string): Promise<string> {
  const child = spawn(binary, [], { stdio: ["pipe", "pipe", "ignore"] });
  try {
    return await new Promise<string>((resolve) => {
      const reader = new FrameReader();
      const timer = setTimeout(() => resolve("nothing within 15 s"), 15_000);
      child.on("error", (error) => resolve(`nothing (${error.message})`));
      child.on("exit", (code) => resolve(`nothing (it exited with status ${code ?? "?"})`));
      child.stdout.on("data", (chunk: Buffer) => {
        for (const frame of reader.push(chunk)) {
          if (frame.type !== response.hello) continue;
          clearTimeout(timer);
          resolve(payloadOf(frame).toString("utf8"));
        }
      });
    });
  } finally {
    child.kill("SIGKILL");
  }
}
