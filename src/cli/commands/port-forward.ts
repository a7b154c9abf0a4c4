import type { Command } from "commander";

import { CordonError, messageOf } from "../../common/index.js";
import { parsePortMapping } from "../../runner/index.js";
import type { CliContext } from "../context.js";
import { withInterrupt } from "../interrupt.js";
import { addPlanOptions, runnerFromFlags, type PlanFlags } from "../runner-flags.js";

interface PortForwardFlags extends PlanFlags {
  address?: string;
}

/**
 * `cordon port-forward [LOCAL:]REMOTE`: a server the agent started in the sandbox (a dev server,
 * a preview) reached from this host, like `kubectl port-forward`. Each connection to
 * LOCAL on this host is carried over the sandbox's executor stream to 127.0.0.1:REMOTE inside
 * it; the sandbox keeps network none. Runs until Ctrl-C.
 */
export function registerPortForwardCommand(program: Command, context: CliContext): void {
  const command = program
    .command("port-forward")
    .description(
      "reach a server in the sandbox from this host (the sandbox keeps network none); until Ctrl-C",
    )
    .argument("<[LOCAL:]REMOTE>", "ports: 3000, 8080:3000, or :3000 for a free local port");
  addPlanOptions(command)
    .option(
      "--address <address>",
      "the address to listen on here (default 127.0.0.1: only this host; 0.0.0.0 opens it to the network)",
    )
    .action(async (mapping: string, flags: PortForwardFlags) => {
      const ports = parsePortMapping(mapping);
      const runner = runnerFromFlags(context, flags);
      let forwarding = "";
      await withInterrupt(
        context,
        async (signal) => {
          const said = new Set<string>();
          const forward = await runner.forwardPort({
            agentId: flags.agent,
            sessionKey: flags.session,
            signal,
            ...ports,
            address: flags.address,
            // Each refused connection would repeat the same line: each reason is said once.
            onError: (error) => {
              const line = `cordon: ${messageOf(error)}${CordonError.is(error) && error.fix ? `\n  fix: ${error.fix}` : ""}\n`;
              if (said.has(line)) return;
              said.add(line);
              context.stderr(line);
            },
          });
          forwarding = `${forward.address}:${forward.localPort} -> ${forward.remotePort} in ${forward.sandbox}`;
          context.stdout(`Forwarding from ${forwarding}\n`);
          if (!isLoopback(forward.address)) {
            context.stderr(
              `cordon: warning: ${forward.address} is not loopback: anyone who reaches this host on port ${forward.localPort} reaches the sandbox's server\n`,
            );
          }
          try {
            await new Promise<void>((resolve) => {
              if (signal.aborted) resolve();
              else signal.addEventListener("abort", () => resolve(), { once: true });
            });
          } finally {
            await forward.close();
          }
        },
        () =>
          forwarding
            ? `stopped forwarding ${forwarding}; the sandbox keeps running`
            : "stopped before the forward started",
      );
    });
}

function isLoopback(address: string): boolean {
  return address === "::1" || address.startsWith("127.") || address === "::ffff:127.0.0.1";
}
