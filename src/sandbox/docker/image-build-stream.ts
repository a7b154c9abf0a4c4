import type { WriteStream } from "node:fs";
import { stripVTControlCharacters } from "node:util";

import type { Readable } from "node:stream";

import { ImageError } from "../../common/index.js";
import type { ImageBuildRequest, ImageClient } from "./client/index.js";
import type { ImageBuildEvent } from "./sandbox-image.js";

/**
 * Builds an image and follows the engine's build stream to its end: writes the engine's output to
 * the log (without the colour codes the engine adds to stderr) and turns its `Step N/M : ...`
 * lines into step events, so a build shows a progress line, not thousands of apt lines. Rejects
 * with an `ImageError` (`what` names the image, `fix` the remedy) when any step failed.
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
  },
): Promise<void> {
  const { log, emit } = options;
  let failure: string | undefined;
  await images.build(context, request, (event) => {
    // The engine reports a failed RUN as an error event on a stream that still ends normally,
    // so every event is checked, not just the end.
    const message = event.error;
    if (message) failure ??= stripVTControlCharacters(message).trim();
    const text = stripVTControlCharacters(event.stream ?? event.status ?? message ?? "");
    if (text === "") return;
    log.write(text.endsWith("\n") ? text : `${text}\n`);
    const step = /^Step (\d+)\/(\d+) : (.*)$/m.exec(text);
    if (step) {
      emit({
        type: "step",
        step: Number(step[1]),
        total: Number(step[2]),
        instruction: step[3]!.trim(),
      });
    }
  });
  if (failure) {
    throw new ImageError(`${options.what} build failed: ${failure}`, { fix: options.fix });
  }
}
