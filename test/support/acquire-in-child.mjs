// A second (third, …) process for the cross-process acquire test: loads cordon from a compiled
// build, says "ready", waits for "go" on stdin, acquires the spec, prints what it got as JSON.
// argv: <build dir> <state dir> <image> <spec JSON>
import { createInterface } from "node:readline";
import path from "node:path";
import { pathToFileURL } from "node:url";

const [buildDirectory, stateDirectory, image, specJson] = process.argv.slice(2);
const { DockerEngine, DockerSandboxManager } = await import(
  pathToFileURL(path.join(buildDirectory, "sandbox", "index.js")).href
);
const manager = new DockerSandboxManager({
  engine: new DockerEngine(),
  stateDirectory,
  image,
  extraLabels: { "cordon.test": "1" },
  createSandbox: (container) => ({ id: container.containerId }),
});
const phases = [];
process.stdout.write("ready\n");
const lines = createInterface({ input: process.stdin });
for await (const line of lines) {
  if (line !== "go") continue;
  try {
    const lease = await manager.acquire(JSON.parse(specJson), {
      onProgress: (event) => phases.push(event.phase),
    });
    process.stdout.write(
      `${JSON.stringify({ containerId: lease.sandbox.id, fresh: lease.fresh, phases })}\n`,
    );
    await lease.release();
  } catch (error) {
    process.stdout.write(`${JSON.stringify({ error: String(error) })}\n`);
  }
  break;
}
lines.close();
