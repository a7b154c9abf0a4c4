/** The exit status of a process killed by SIGPIPE (128 + 13), as `git log | head -1` leaves git. */
export const closedPipeExitCode = 141;

/**
 * A reader that goes away (`cordon sessions list | head -1`) is the end of the output, not a
 * crash: the process ends as one killed by SIGPIPE would, without a stack trace. Node ignores
 * SIGPIPE and reports EPIPE as an error on the stream instead, unhandled unless caught here.
 */
export function endOnClosedPipe(stream: NodeJS.WriteStream): void {
  stream.on("error", (error: NodeJS.ErrnoException) => {
    if (error.code !== "EPIPE") throw error;
    process.exit(closedPipeExitCode);
  });
}
