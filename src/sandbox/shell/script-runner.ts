/**
 * What the shared shell pieces need from a backend: run one short program to the end and collect
 * its output. The Docker backend runs it through the exec API inside the container; the host
 * backend spawns it. Aborting rejects with `AbortedError`.
 */
export interface ScriptRunner {
  run(
    request: {
      cmd: string[];
      /** Extra environment, `NAME=value`. */
      env?: string[] | undefined;
      /** Bytes for stdin, then end-of-file; without it stdin is empty. */
      stdin?: Uint8Array | undefined;
    },
    signal?: AbortSignal,
  ): Promise<{ exitCode: number; stdout: Buffer; stderr: Buffer }>;
}
