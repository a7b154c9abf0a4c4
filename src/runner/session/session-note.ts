import { JsonlSession } from "./jsonl-session.js";

/**
 * Appends a note from cordon to a session's transcript, as a user message the agent's next turn
 * reads: something changed under it that it did not do (a rollback, a fork).
 */
export async function appendSessionNote(options: {
  stateDir: string;
  sessionKey: string;
  /** The plan's `agent.workspaceId`. */
  project: string;
  text: string;
  signal?: AbortSignal | undefined;
}): Promise<void> {
  const session = await JsonlSession.open(options);
  try {
    await session.append({ role: "user", content: [{ type: "text", text: options.text }] });
  } finally {
    await session.close();
  }
}
