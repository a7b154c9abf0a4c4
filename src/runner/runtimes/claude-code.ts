import { ConfigError, SandboxError } from "../../common/index.js";
import { anthropicApiUrl, createModelGateway } from "../../sandbox/index.js";
import { quoteShellArg } from "../../common/index.js";
import type { RunPlan } from "../../policy/index.js";
import type { AgentRuntime, AgentRuntimeRun } from "../orchestrate/index.js";
import type { RunResult } from "../loop/index.js";
import { ClaudeCodeEvents } from "./claude-code-events.js";
import { OutputLines } from "./output-lines.js";

/**
 * cordon's tools and the Claude Code tools that do the same: when the plan does not allow the
 * cordon tool, Claude Code is started without its counterparts (`--disallowedTools`).
 */
const claudeCodeToolsOf: Readonly<Record<string, readonly string[]>> = {
  exec: ["Bash"],
  process: ["BashOutput", "KillShell", "Monitor", "TaskStop"],
  read: ["Read"],
  write: ["Write"],
  edit: ["Edit", "MultiEdit", "NotebookEdit"],
  ls: ["LS"],
  find: ["Glob"],
  grep: ["Grep"],
};

/**
 * Never offered: both reach the web from outside the sandbox's egress policy (web search runs on
 * the API's side of the gateway), so the allowlist would not decide them.
 */
const alwaysDisallowed = ["WebFetch", "WebSearch"];

/** The host's model credential and endpoint, which stay on the host (the gateway adds them). */
export interface HostModelAccess {
  credential: { apiKey: string } | { authToken: string };
  upstream: string;
}

/**
 * ANTHROPIC_API_KEY (else the first of ANTHROPIC_API_KEYS, else ANTHROPIC_AUTH_TOKEN) and
 * ANTHROPIC_BASE_URL of cordon's environment.
 */
export function hostModelAccess(env: NodeJS.ProcessEnv): HostModelAccess | undefined {
  const upstream = env["ANTHROPIC_BASE_URL"] || anthropicApiUrl;
  // With a list of keys (ANTHROPIC_API_KEYS), the gateway uses the first: it does not rotate.
  const apiKey =
    env["ANTHROPIC_API_KEY"] ||
    env["ANTHROPIC_API_KEYS"]
      ?.split(",")
      .map((key) => key.trim())
      .find(Boolean);
  if (apiKey) return { credential: { apiKey }, upstream };
  if (env["ANTHROPIC_AUTH_TOKEN"]) {
    return { credential: { authToken: env["ANTHROPIC_AUTH_TOKEN"] }, upstream };
  }
  return undefined;
}

/** The Claude Code tools a plan rules out: counterparts of cordon tools it does not allow. */
export function disallowedClaudeCodeTools(plan: {
  tools: Pick<RunPlan["tools"], "allowed">;
}): string[] {
  const allowed = new Set(plan.tools.allowed);
  const denied = Object.entries(claudeCodeToolsOf)
    .filter(([tool]) => !allowed.has(tool))
    .flatMap(([, tools]) => tools);
  return [...alwaysDisallowed, ...denied];
}

export interface ClaudeCodeRuntimeOptions {
  /** The host's credential; undefined fails the run before any sandbox starts. */
  access: HostModelAccess | undefined;
}

/**
 * Claude Code (`claude -p`) inside the sandbox (docs/runtimes.md): its own permission prompts off,
 * since cordon's sandbox is the boundary; its API calls go to cordon's model gateway with a
 * placeholder key, and its stream-json becomes cordon's run events.
 */
export class ClaudeCodeRuntime implements AgentRuntime {
  readonly name = "claude-code";

  constructor(private readonly options: ClaudeCodeRuntimeOptions) {}

  prepare(): Promise<void> {
    this.access();
    return Promise.resolve();
  }

  async run(run: AgentRuntimeRun): Promise<RunResult> {
    const access = this.access();
    const forwardPort = run.lease.forwardPort;
    if (!forwardPort) {
      throw new SandboxError(
        "the claude-code runtime reaches its model gateway through a port cordon forwards into the sandbox, and this sandbox cannot forward one",
        { fix: 'run it with cordon\'s Docker sandboxes (sandbox.mode "all", network "none")' },
      );
    }
    const gateway = createModelGateway({
      upstream: access.upstream,
      credential: access.credential,
      onCall: (call) => run.emit({ type: "model-gateway", ...call }),
    });
    // A loopback port in the sandbox whose every connection this gateway serves: this run's only.
    const forwarded = await forwardPort((channel) => gateway.accept(channel)).catch(
      async (error: unknown) => {
        await gateway.close();
        throw error;
      },
    );
    try {
      const gatewayUrl = `http://127.0.0.1:${forwarded.port}`;
      const noProxy = "localhost,127.0.0.1,::1";
      const argv = [
        "claude",
        "-p",
        '"$CORDON_TASK"',
        "--output-format",
        "stream-json",
        "--verbose",
        "--permission-mode",
        "bypassPermissions",
        "--model",
        quoteShellArg(run.modelId),
        "--disallowedTools",
        quoteShellArg(disallowedClaudeCodeTools(run.plan).join(",")),
        ...(run.plan.limits.maxTurns ? ["--max-turns", String(run.plan.limits.maxTurns)] : []),
      ];
      const events = new ClaudeCodeEvents(run.emit);
      const lines = new OutputLines((line) => events.line(line));
      const result = await run.lease.sandbox.exec(argv.join(" "), {
        env: {
          // The task goes in as data, never as shell text.
          CORDON_TASK: run.prompt,
          ANTHROPIC_BASE_URL: gatewayUrl,
          ANTHROPIC_API_KEY: gateway.placeholderKey,
          NO_PROXY: noProxy,
          no_proxy: noProxy,
          // The sandbox, not Claude Code's root check, is the boundary (a sandbox user may be 0).
          IS_SANDBOX: "1",
          CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1",
          DISABLE_AUTOUPDATER: "1",
        },
        timeoutMs: run.plan.limits.timeoutMs,
        signal: run.signal,
        onStdout: lines.push,
      });
      lines.end();
      return events.runResult(
        { runId: run.runId, sessionKey: run.sessionKey, startedAt: run.startedAt },
        result,
      );
    } finally {
      forwarded.close();
      await gateway.close();
    }
  }

  private access(): HostModelAccess {
    const access = this.options.access;
    if (!access) {
      throw new ConfigError(
        "the claude-code runtime needs a model key, and cordon's environment has none",
        {
          fix: "set ANTHROPIC_API_KEY (or ANTHROPIC_AUTH_TOKEN) where cordon runs; cordon's gateway adds it to the agent's calls and it never enters the sandbox",
        },
      );
    }
    return access;
  }
}
