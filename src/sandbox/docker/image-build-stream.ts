import type { WriteStream } from "node:fs";
import { stripVTControlCharacters } from "node:util";

import type Docker from "dockerode";

import { ImageError } from "../../common/index.js";
import { toSandboxError } from "./docker-errors.js";
import type { ImageBuildEvent } from "./sandbox-image.js";

interface BuildStreamEvent {
  stream?: string;
  status?: string;
  error?: string;
  errorDetail?: { message?: string };
}

/**
 * Follows an engine build stream to its end: writes the engine's output to the log (without the
 * colour codes the engine adds to stderr) and turns its `Step N/M : ...` lines into step events,
 * so a build shows a progress line, not thousands of apt lines. Rejects with an `ImageError`
 * (`what` names the image, `fix` the remedy) when any step failed.
 */
export function followImageBuild(
  modem: Docker["modem"],
  stream: NodeJS.ReadableStream,
  options: {
    log: WriteStream;
    emit: (event: ImageBuildEvent) => void;
    what: string;
    fix: string;
  },
): Promise<void> {
  const { log, emit } = options;
  let failure: string | undefined;
  return new Promise((resolve, reject) => {
    modem.followProgress(
      stream,
      (error) => {
        if (error) reject(toSandboxError(error, `build ${options.what}`));
        else if (failure)
          reject(new ImageError(`${options.what} build failed: ${failure}`, { fix: options.fix }));
        else resolve();
      },
      (event: BuildStreamEvent) => {
        // The engine reports a failed RUN as an error event on a stream that still ends
        // normally, so every event is checked, not just the end.
        const message = event.errorDetail?.message ?? event.error;
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
      },
    );
  });
}
