import type { RunnerEvent } from "../../runner/index.js";

/**
 * Follows a run's events so that, if a signal stops it, one line can say what was stopped and
 * what is left: a run that was only waiting for its session left nothing; one that ran keeps its
 * transcript (and its sandbox the session's files), and continues with the same --session.
 */
export class RunStopReport {
  private sessionKey: string | undefined;
  private waitingFor: string | undefined;
  private started = false;
  private sandboxed = false;
  /** Known once the run ended (a forced stop does not wait for that). */
  private turns: number | undefined;

  constructor(private readonly sessionFlag: string | undefined) {}

  onEvent(event: RunnerEvent): void {
    switch (event.type) {
      case "run-start":
        this.sessionKey = event.sessionKey || this.sessionKey;
        break;
      case "session-wait":
        this.sessionKey = event.sessionKey;
        this.waitingFor = `pid ${event.holder.pid} on ${event.holder.host}`;
        break;
      case "sandbox-ready":
        this.started = true;
        this.waitingFor = undefined;
        this.sandboxed = event.kind === "docker";
        break;
      case "run-end":
        this.turns = event.turns;
        break;
      default:
        break;
    }
  }

  /** The line's text after `cordon: SIGTERM: `. */
  describe(): string {
    const session = this.sessionKey ?? "the session";
    if (this.waitingFor !== undefined) {
      return `stopped waiting for session ${session}, which a run holds (${this.waitingFor}); nothing ran`;
    }
    if (!this.started) return `stopped the run before it began; nothing ran`;
    const turns =
      this.turns === undefined ? "" : ` after ${this.turns} turn${this.turns === 1 ? "" : "s"}`;
    const kept = this.sandboxed ? "the sandbox keeps the session's files" : "the session is saved";
    const again = this.sessionFlag === undefined ? "" : ` --session ${this.sessionFlag}`;
    return `stopped the run of ${session}${turns}; ${kept}: \`cordon run${again}\` continues it`;
  }
}
