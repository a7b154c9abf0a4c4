import type { UserContentBlock } from "../model/index.js";
import type { RunEvent } from "./run-events.js";

/**
 * Messages handed to a running run: the loop drains its steering source after every tool call
 * (the turn's remaining calls are then skipped and the messages go to the model next) and its
 * follow-up source when the model would stop (messages start another round). Contract: `drain`
 * must not throw (a throw is logged and taken as no messages), must not block, and returns each
 * message once. `MessageQueue` is one; any object with a `drain` is another.
 */
export interface MessageSource {
  drain(): UserContentBlock[][];
}

/**
 * A run's traffic with its caller, declared once and passed whole from `runner.run` through the
 * orchestrator to the loop. `Event` is what the caller hears: the loop's events, or the runner's
 * (which add the orchestrator's own).
 */
export interface RunIO<Event = RunEvent> {
  /** Aborts the run: stops the model stream and the running tool; the session stays consistent. */
  signal?: AbortSignal | undefined;
  /** Receives every event; a throwing listener is logged and ignored. */
  onEvent?: ((event: Event) => void) | undefined;
  /** Messages delivered between tool calls; the rest of that turn's calls are skipped. */
  steering?: MessageSource | undefined;
  /** Messages delivered when the model would otherwise stop. */
  followUps?: MessageSource | undefined;
}
