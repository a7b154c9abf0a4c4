import type { WriteStream } from "node:fs";
import { stripVTControlCharacters } from "node:util";

import type { Readable } from "node:stream";

import { ImageError } from "../../common/index.js";
import type { ImageBuildRequest, ImageClient } from "./client/index.js";
import type { ImageBuildEvent } from "./sandbox-image.js";

/** A step still running this long shows its latest line, and again at most this often. */
const stepOutputEveryMs = 5_000;
/** Lines of a failed step quoted in the error: the cause is usually among them. */
const failureTailLines = 12;

/**
 * Builds an image and follows the engine's build stream to its end: writes the engine's output to
 * the log (without the colour codes the engine adds to stderr) and turns its `Step N/M : ...`
 * lines into step events, so a build shows a progress line, not thousands of apt lines — with the
 * time so far, and a long step's latest line every few seconds. Rejects with an `ImageError`
 * (`what` names the image, `fix` the remedy) when any step failed, quoting the failed step's last
 * lines: the engine's own error says only "returned a non-zero code".
 */
export async function buildImageLogged(
  images: ImageClient,
  context: Readable,
  request: ImageBuildRequest,
  options: {
    log: WriteStream;
    emit: (event: ImageBuildEvent) => void;
    what: string;
    fix: string;
    /** Clock, for tests. */
    now?: () => number;
  },
): Promise<void> {
  const { log, emit } = options;
  const now = options.now ?? (() => performance.now());
  const started = now();
  let failure: string | undefined;
  let step = 0;
  let stepOutput: string[] = [];
  let nextOutputAt = Infinity;
  await images.build(context, request, (event) => {
    // The engine reports a failed RUN as an error event on a stream that still ends normally,
    // so every event is checked, not just the end.
    const message = event.error;
    if (message) failure ??= stripVTControlCharacters(message).trim();
    const text = stripVTControlCharacters(event.stream ?? event.status ?? message ?? "");
    if (text === "") return;
    log.write(text.endsWith("\n") ? text : `${text}\n`);
    const at = now();
    const stepStart = /^Step (\d+)\/(\d+) : (.*)$/m.exec(text);
    if (stepStart) {
      step = Number(stepStart[1]);
      stepOutput = [];
      nextOutputAt = at + stepOutputEveryMs;
      emit({
        type: "step",
        step,
        total: Number(stepStart[2]),
        instruction: stepStart[3]!.trim(),
        elapsedMs: at - started,
      });
      return;
    }
    if (message) return;
    const lines = text.split("\n").filter((line) => line.trim() !== "");
    stepOutput = [...stepOutput, ...lines].slice(-failureTailLines);
    const latest = lines.at(-1);
    if (latest !== undefined && at >= nextOutputAt) {
      nextOutputAt = at + stepOutputEveryMs;
      emit({ type: "step-output", step, line: latest, elapsedMs: at - started });
    }
  });
  if (failure) {
    const tail = stepOutput.length
      ? `\n  the step's last lines:\n${stepOutput.map((line) => `    ${line}`).join("\n")}`
      : "";
    throw new ImageError(
      `${options.what} build failed: ${failure}${tail}\n  full log: ${String(log.path)}`,
      {
        fix: options.fix,
      },
    );
  }
}
