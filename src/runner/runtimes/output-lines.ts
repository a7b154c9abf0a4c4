/**
 * Bytes as they come from a process, handed on as whole lines (without the newline): chunks
 * split anywhere, a multi-byte character included. `end` hands on a last line with no newline.
 */
export class OutputLines {
  private readonly decoder = new TextDecoder();
  private pending = "";

  constructor(private readonly onLine: (line: string) => void) {}

  push = (chunk: Uint8Array): void => {
    this.pending += this.decoder.decode(chunk, { stream: true });
    let newline = this.pending.indexOf("\n");
    while (newline >= 0) {
      this.onLine(this.pending.slice(0, newline).replace(/\r$/, ""));
      this.pending = this.pending.slice(newline + 1);
      newline = this.pending.indexOf("\n");
    }
  };

  end(): void {
    this.pending += this.decoder.decode();
    if (this.pending !== "") this.onLine(this.pending);
    this.pending = "";
  }
}
