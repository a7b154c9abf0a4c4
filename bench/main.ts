/**
 * `npm run bench`: DESIGN.md §8's figures, each beside its plain-Docker baseline from the same
 * run. JSON on stdout, a table on stderr; exit 0 when every figure ran without failures.
 * docs/benchmarks.md explains the figures.
 */
import { BenchSetupError } from "./context.js";
import { BenchUsageError, parseBenchArgs, usage } from "./options.js";
import { renderTable } from "./report.js";
import { runBench } from "./run.js";

async function main(): Promise<number> {
  let options;
  try {
    options = parseBenchArgs(process.argv.slice(2));
  } catch (error) {
    if (!(error instanceof BenchUsageError)) throw error;
    process.stderr.write(`bench: ${error.message}\n${usage}\n`);
    return 2;
  }
  if (!options) {
    process.stdout.write(`${usage}\n`);
    return 0;
  }

  // Ctrl-C: stop at the next step; runBench removes the run's containers before it returns.
  const interrupt = new AbortController();
  const onSignal = (): void => {
    if (interrupt.signal.aborted) {
      process.stderr.write(
        "bench: interrupted again; leaving now (remove leftovers with `docker rm -f $(docker ps -aq --filter label=cordon.bench=1)`)\n",
      );
      process.exit(130);
    }
    process.stderr.write("bench: interrupted; removing the bench's containers…\n");
    interrupt.abort();
  };
  process.on("SIGINT", onSignal);
  process.on("SIGTERM", onSignal);

  try {
    const report = await runBench({ ...options, signal: interrupt.signal });
    process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
    process.stderr.write(`${renderTable(report)}\n`);
    return report.failures === 0 ? 0 : 1;
  } catch (error) {
    if (interrupt.signal.aborted) return 130;
    const message = error instanceof Error ? error.message : String(error);
    process.stderr.write(`bench: ${message}\n`);
    return error instanceof BenchSetupError ? 3 : 1;
  }
}

// Exit explicitly: dockerode's keep-alive sockets would hold the process open for a while.
main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    process.stderr.write(`bench: ${String(error)}\n`);
    process.exit(1);
  },
);
