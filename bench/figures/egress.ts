import { createServer } from "node:http";
import { connect } from "node:net";
import type { Duplex } from "node:stream";

import { relay } from "../../src/sandbox/docker/egress/proxy-channel.js";
import { DockerSandbox } from "../../src/sandbox/index.js";
import type { BenchContext } from "../context.js";
import { summarise } from "../measure.js";
import type { FigureResult } from "../report.js";
import { FailureCount } from "./failures.js";

/**
 * An HTTP request through the sandbox's egress path, one new connection each, timed inside the
 * sandbox (connect, send, read the answer to its end): what every connection a package manager
 * opens pays. The request names a host not on the allowlist, so squid answers 403 itself and
 * nothing leaves the machine — the figure is the path, not the internet.
 *
 * - cordon: the sandbox's proxy port, relayed by cordon's process into squid's container over
 *   the executor there (proxy-channel.ts), as every sandbox with egress does now;
 * - baseline: the same sandbox and squid, through a second forwarded port whose destination is a
 *   TCP connection to squid's address on the default bridge — the path before squid was reached
 *   through its container (it needs the engine on this host);
 * - floor: a forwarded port answered by an HTTP server in cordon's process (the sandbox's own
 *   channel, no squid at all).
 */
const requestScript = `
import json, socket, sys, time
port, count = int(sys.argv[1]), int(sys.argv[2])
request = b"GET http://refused.example/ HTTP/1.1\\r\\nHost: refused.example\\r\\nConnection: close\\r\\n\\r\\n"
times = []
for _ in range(count):
    started = time.perf_counter()
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(request)
    answer = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        answer += chunk
    s.close()
    times.append((time.perf_counter() - started) * 1000)
    if not answer.startswith(b"HTTP/1.1 403"):
        sys.exit("unexpected answer: " + answer[:80].decode("latin-1"))
print(json.dumps(times))
`;

export async function egressFigure(ctx: BenchContext): Promise<FigureResult> {
  const rounds = ctx.quick ? 3 : 20;
  const perRound = ctx.quick ? 5 : 10;
  const spec = await ctx.spec("egress", { allowHosts: ["registry.npmjs.org"] });
  const egress = spec.egress;
  if (!egress) throw new Error("the egress plan has no proxy");
  ctx.progress("egress: the egress proxy (its image is built on first use)");
  const lease = await ctx.manager.acquire(spec, { signal: ctx.signal });
  const failures = new FailureCount();
  const floorServer = createServer((_request, response) => {
    response.writeHead(403, { "content-type": "text/plain" }).end("refused\n");
  });
  try {
    const sandbox = lease.sandbox;
    if (!(sandbox instanceof DockerSandbox)) throw new Error("the bench sandbox is not Docker's");
    await sandbox.openForwards();
    const bridge = await sandbox.forwardPort(0, (channel: Duplex) => {
      void ctx.engine.containers.inspect(egress.proxyContainer).then(
        (proxy) => {
          const address = proxy?.addresses?.["bridge"];
          if (!address) return void channel.destroy();
          relay(channel, connect({ host: address, port: egress.proxyPort }));
        },
        () => channel.destroy(),
      );
    });
    const floor = await sandbox.forwardPort(0, (channel) =>
      floorServer.emit("connection", channel),
    );
    const ports = { cordon: egress.proxyPort, bridge: bridge.port, floor: floor.port } as const;
    type Path = keyof typeof ports;
    const samples: Record<Path, number[]> = { cordon: [], bridge: [], floor: [] };
    const paths = Object.keys(ports) as Path[];
    ctx.progress(`egress: ${rounds} rounds of ${perRound} requests on each path, in turns`);
    for (let round = -1; round < rounds; round += 1) {
      for (let k = 0; k < paths.length; k += 1) {
        ctx.signal.throwIfAborted();
        const path = paths[(round + 1 + k) % paths.length] as Path;
        const times = await failures.guard(async () => {
          const result = await sandbox.exec(
            `python3 -c '${requestScript}' ${ports[path]} ${perRound}`,
            { signal: ctx.signal, timeoutMs: 120_000 },
          );
          if (result.exitCode !== 0) throw new Error(`${path}: ${result.stderr.trim()}`);
          return JSON.parse(result.stdout) as number[];
        });
        // The first round warms each path up (the executor in squid starts on first use).
        if (times && round >= 0) samples[path].push(...times);
      }
    }
    bridge.close();
    floor.close();
    const cordon = summarise(samples.cordon);
    const ratio = (baseline: number[]) =>
      Math.round((cordon.medianMs / summarise(baseline).medianMs) * 1000) / 1000;
    const measures = "a new connection and a request squid refuses (403)";
    return {
      name: "egress",
      title: "a request through the egress proxy (new connection each)",
      comparisons: [
        {
          measures,
          cordon,
          baseline: summarise(samples.bridge),
          baselineName: "squid at its bridge address (the path before)",
          ratio: ratio(samples.bridge),
        },
        {
          measures,
          cordon,
          baseline: summarise(samples.floor),
          baselineName: "the sandbox's forwarded port alone (an HTTP server in cordon)",
          ratio: ratio(samples.floor),
        },
      ],
      failures: failures.count,
      details: { rounds, requestsPerRound: perRound, ...failures.details() },
    };
  } finally {
    floorServer.close();
    await lease.release();
    await ctx.inventory
      .remove(lease.containerName, { discardChanges: true })
      .catch(() => ctx.baselines.removeContainer(lease.containerName));
    await ctx.baselines.removeContainer(egress.proxyContainer);
  }
}
