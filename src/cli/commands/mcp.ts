import { randomBytes } from "node:crypto";
import path from "node:path";

import { Option, type Command } from "commander";

import { ConfigError } from "../../common/index.js";
import {
  McpSession,
  claudeRecipe,
  clientConfig,
  mcpClients,
  type McpClient,
  isLoopback,
  parseListenAddress,
  serveHttp,
  serveStdio,
  type ListenAddress,
} from "../../mcp/index.js";
import type { CliContext } from "../context.js";
import { nameList } from "../flag-parsers.js";
import { withInterrupt } from "../interrupt.js";
import { quoteShellArg } from "../../tools/index.js";
import { addPlanOptions, runnerFromFlags, type PlanFlags } from "../runner-flags.js";
import { selfCommand } from "../self-command.js";
import { parseDuration } from "./parse-duration.js";
import { removeSandboxAfter } from "./remove-after.js";

interface McpFlags extends PlanFlags {
  allowTools?: string[];
  denyTools?: string[];
  rm?: boolean;
  /** `--no-wait` sets it false. */
  wait: boolean;
  http?: ListenAddress;
  idleTimeout: number;
  printConfig?: McpClient;
}

/** `--idle-timeout`: a duration, or 0/off for never. */
function parseIdleTimeout(text: string): number {
  return /^(0|off|never)$/i.test(text.trim()) ? 0 : parseDuration(text, "--idle-timeout");
}

/** The `cordon mcp` arguments a client's config starts the server with: these flags, paths absolute. */
function serverArgs(flags: McpFlags): string[] {
  const args = ["mcp"];
  if (flags.agent !== undefined) args.push("--agent", flags.agent);
  if (flags.session !== undefined) args.push("--session", flags.session);
  if (flags.config !== undefined) args.push("--config", path.resolve(flags.config));
  if (flags.workspace !== undefined) args.push("--workspace", path.resolve(flags.workspace));
  if (flags.runtime !== undefined) args.push("--runtime", flags.runtime);
  for (const host of flags.allowHost ?? []) args.push("--allow-host", host);
  if (flags.allowTools?.length) args.push("--allow-tools", flags.allowTools.join(","));
  if (flags.denyTools?.length) args.push("--deny-tools", flags.denyTools.join(","));
  if (flags.rm) args.push("--rm");
  if (!flags.wait) args.push("--no-wait");
  return args;
}

/** The variable a bearer token for `--http` may come from (else one is made and printed). */
export const tokenVariable = "CORDON_MCP_TOKEN";

function bearerToken(env: NodeJS.ProcessEnv): { token: string; generated: boolean } {
  const given = env[tokenVariable];
  if (given === undefined || given === "") {
    return { token: randomBytes(24).toString("base64url"), generated: true };
  }
  if (given.length < 16 || /\s/.test(given)) {
    throw new ConfigError(`${tokenVariable} must be at least 16 characters, without spaces`, {
      fix: `unset ${tokenVariable} to have cordon make a token, or set a long random one (openssl rand -base64 24)`,
    });
  }
  return { token: given, generated: false };
}

/**
 * The session a connection works in when `--session` names none: one per connection, named so
 * `cordon diff --session mcp-1a2b3c` finds it.
 */
export function connectionSessionName(): string {
  return `mcp-${randomBytes(3).toString("hex")}`;
}

/** The flags `cordon diff` and `cordon apply` need to find what this server's session did. */
function reviewFlags(flags: McpFlags, session: string): string {
  const words = ["--session", session];
  if (flags.agent !== undefined) words.push("--agent", flags.agent);
  if (flags.workspace !== undefined) words.push("--workspace", path.resolve(flags.workspace));
  if (flags.config !== undefined) words.push("--config", path.resolve(flags.config));
  return words
    .map((word) => (/^[\w@%+=:,./-]+$/.test(word) ? word : quoteShellArg(word)))
    .join(" ");
}

/**
 * `cordon mcp`: the tools of a session's sandbox, as an MCP server over stdio, for any MCP client
 * (Claude Code, Cursor, Codex). The policy, the sandbox and the review-then-apply of `cordon run`
 * hold unchanged; there is no apply tool (docs/mcp.md).
 */
export function registerMcpCommand(program: Command, context: CliContext): void {
  const mcp = program
    .command("mcp")
    .description(
      "serve the session's allowed tools to an MCP client (Claude Code, Cursor, Codex) over stdio; every call runs in the sandbox `cordon run` would get, and the person reviews and applies with `cordon diff` and `cordon apply`",
    );
  addPlanOptions(mcp)
    .option(
      "--allow-tools <names>",
      "only these tools (comma-separated; narrows the policy)",
      nameList,
    )
    .option("--deny-tools <names>", "never these tools (comma-separated)", nameList)
    .option("--rm", "remove the sandbox (container and private copy) when the client goes away")
    .option(
      "--http <[host:]port>",
      `serve streamable HTTP on this address instead of stdio (loopback unless a host is named); clients send the bearer token printed at start, or ${tokenVariable}`,
      parseListenAddress,
    )
    .option(
      "--idle-timeout <duration>",
      "with --http: close a client's session after this long without a request (its sandbox released, the work kept); 0 for never",
      parseIdleTimeout,
      30 * 60_000,
    )
    .option(
      "--no-wait",
      "if another run holds the session, refuse the client's calls instead of waiting for it",
    )
    .addOption(
      new Option(
        "--print-config <client>",
        "print the client's config for this server (these flags included) and exit: Claude Code's --mcp-config/.mcp.json, Cursor's .cursor/mcp.json, Codex's ~/.codex/config.toml",
      ).choices(mcpClients),
    )
    .action(async (flags: McpFlags) => {
      const runner = runnerFromFlags(context, flags);
      const version = program.version() ?? "0.0.0";
      const newSession = (): { session: McpSession; name: string; review: string } => {
        const name = flags.session ?? connectionSessionName();
        const request = {
          agentId: flags.agent,
          sessionKey: name,
          allowTools: flags.allowTools,
          denyTools: flags.denyTools,
        };
        const review = reviewFlags(flags, name);
        const session = new McpSession({
          runner,
          request,
          waitForSession: flags.wait,
          logger: context.logger,
          reviewFlags: review,
          afterClose: flags.rm
            ? (plan) => removeSandboxAfter(context, runner, plan, request)
            : undefined,
        });
        return { session, name, review };
      };
      const listen = flags.http;
      if (flags.printConfig !== undefined) {
        if (listen?.port === 0) {
          throw new ConfigError("--print-config with --http needs the port clients will use", {
            fix: "name a port, e.g. --http 8765",
          });
        }
        const host = listen?.host.includes(":") ? `[${listen.host}]` : listen?.host;
        const self = selfCommand({
          script: process.argv[1],
          pathVariable: context.env["PATH"],
          nodePath: process.execPath,
        });
        const endpoint = listen
          ? { kind: "http" as const, url: `http://${host}:${listen.port}/mcp`, tokenVariable }
          : {
              kind: "stdio" as const,
              command: self.command,
              args: [...self.args, ...serverArgs(flags)],
            };
        context.stdout(clientConfig(flags.printConfig, endpoint));
        if (flags.printConfig === "claude") {
          const { session } = newSession();
          const tools = [...(await session.tools()).map((tool) => tool.name), "explain", "diff"];
          context.stderr(
            `· save it as cordon.mcp.json, then: ${claudeRecipe("cordon.mcp.json", tools)}\n`,
          );
        }
        return;
      }
      if (listen === undefined) {
        const { session, name, review } = newSession();
        // stderr is the client's log of this server: say where the work goes and how to review it.
        context.stderr(
          `· cordon mcp: session ${name}; review with \`cordon diff ${review}\`, apply with \`cordon apply ${review}\`\n`,
        );
        await withInterrupt(
          context,
          (signal) => serveStdio({ session, version, signal }),
          () => `stopped serving session ${name}; its sandbox keeps the work`,
        );
        return;
      }
      const { token, generated } = bearerToken(context.env);
      const names = new WeakMap<McpSession, string>();
      if (!isLoopback(listen.host)) {
        context.stderr(
          `· warning: listening on ${listen.host}, not loopback: anyone who can reach it and has the token runs commands in your sandboxes\n`,
        );
      }
      await withInterrupt(
        context,
        (signal) =>
          serveHttp({
            listen,
            token,
            version,
            logger: context.logger,
            signal,
            idleTimeoutMs: flags.idleTimeout,
            onIdleClose: (session) => {
              context.stderr(
                `· session ${names.get(session) ?? "?"}: no request for ${Math.round(flags.idleTimeout / 1000)} s, so it was closed; its sandbox keeps the work\n`,
              );
            },
            newSession: () => {
              const { session, name, review } = newSession();
              names.set(session, name);
              context.stderr(
                `· client connected: session ${name}; review with \`cordon diff ${review}\`\n`,
              );
              return session;
            },
            onListening: (url) => {
              context.stderr(`· cordon mcp: serving ${url}\n`);
              context.stderr(
                generated
                  ? `· bearer token (clients send Authorization: Bearer TOKEN; set ${tokenVariable} to choose it): ${token}\n`
                  : `· bearer token: the value of ${tokenVariable}\n`,
              );
            },
          }),
        () => "stopped the MCP server; each session's sandbox keeps its work",
      );
    });
}
