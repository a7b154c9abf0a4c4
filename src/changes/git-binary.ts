import { constants as bufferConstants } from "node:buffer";
import { inflateSync } from "node:zlib";

/**
 * Decoding of the hunks of a `GIT binary patch`: base85 lines (git's alphabet, a length letter in
 * front), zlib-deflated, holding either the whole new file (`literal`) or a delta against the old
 * one (`delta`). Everything is checked as git's own apply checks it, so bytes this accepts are
 * bytes git reads the same way; anything else is refused by throwing an Error naming the reason, which
 * the patch parser turns into an error naming the line.
 */

const alphabet =
  "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz!#$%&()*+-;<=>?@^_`{|}~";
const digitOf = new Map([...alphabet].map((char, index) => [char, index]));

/** One base85 line of a binary hunk (without its newline) → its bytes. */
export function decodeBase85Line(line: string): Uint8Array {
  const lengthChar = line.charCodeAt(0);
  let byteLength: number;
  if (lengthChar >= 65 && lengthChar <= 90) byteLength = lengthChar - 65 + 1;
  else if (lengthChar >= 97 && lengthChar <= 122) byteLength = lengthChar - 97 + 27;
  else throw new Error("a binary line does not start with a length letter (A-Z, a-z)");
  const encoded = line.slice(1);
  // git: the encoded part is whole 5-character groups, just enough for the length.
  const maxBytes = (encoded.length / 5) * 4;
  if (encoded.length % 5 !== 0 || byteLength > maxBytes || byteLength <= maxBytes - 4) {
    throw new Error("a binary line's length letter does not match its length");
  }
  const bytes = new Uint8Array(maxBytes);
  for (let group = 0; group < encoded.length / 5; group += 1) {
    let value = 0;
    for (let i = 0; i < 5; i += 1) {
      const digit = digitOf.get(encoded[group * 5 + i] ?? "");
      if (digit === undefined)
        throw new Error("a binary line has a character outside git's base85");
      value = value * 85 + digit;
    }
    if (value > 0xffffffff) throw new Error("a binary line has a base85 group out of range");
    bytes[group * 4] = value >>> 24;
    bytes[group * 4 + 1] = (value >>> 16) & 0xff;
    bytes[group * 4 + 2] = (value >>> 8) & 0xff;
    bytes[group * 4 + 3] = value & 0xff;
  }
  return bytes.subarray(0, byteLength);
}

/**
 * Inflates a hunk's data; it must come out at exactly the declared size. The size bounds the
 * output, so a small hunk cannot inflate into gigabytes.
 */
export function inflateExactly(data: Uint8Array, size: number): Uint8Array {
  if (size > bufferConstants.MAX_LENGTH)
    throw new Error(`a binary hunk of ${size} bytes is too large to check`);
  let inflated: Buffer;
  try {
    inflated = inflateSync(data, { maxOutputLength: Math.max(1, size) });
  } catch {
    throw new Error(`a binary hunk does not inflate to its declared ${size} bytes`);
  }
  if (inflated.length !== size) {
    throw new Error(`a binary hunk inflates to ${inflated.length} bytes, not its declared ${size}`);
  }
  return inflated;
}

function readVarint(delta: Uint8Array, start: number): { value: number; next: number } {
  let value = 0;
  let shift = 0;
  let at = start;
  for (;;) {
    const byte = delta[at];
    if (byte === undefined || shift > 49) throw new Error("a binary delta has a bad size header");
    value += (byte & 0x7f) * 2 ** shift;
    shift += 7;
    at += 1;
    if ((byte & 0x80) === 0) return { value, next: at };
  }
}

/**
 * Checks a git delta's structure (as git's patch-delta.c reads it): copies stay within the source
 * and the instructions produce exactly the declared result size. The content needs the old file,
 * which the patch does not carry, so nothing is returned.
 */
export function checkDelta(delta: Uint8Array): void {
  const source = readVarint(delta, 0);
  const target = readVarint(delta, source.next);
  let at = target.next;
  let produced = 0;
  while (at < delta.length) {
    const command = delta[at] ?? 0;
    at += 1;
    if (command & 0x80) {
      let offset = 0;
      let size = 0;
      for (let bit = 0; bit < 4; bit += 1) {
        if (command & (1 << bit)) offset += (delta[at++] ?? 0) * 2 ** (8 * bit);
      }
      for (let bit = 0; bit < 3; bit += 1) {
        if (command & (1 << (4 + bit))) size += (delta[at++] ?? 0) * 2 ** (8 * bit);
      }
      if (size === 0) size = 0x10000;
      if (at > delta.length || offset + size > source.value) {
        throw new Error("a binary delta copies from outside its source");
      }
      produced += size;
    } else if (command !== 0) {
      at += command;
      if (at > delta.length) throw new Error("a binary delta is cut short");
      produced += command;
    } else {
      throw new Error("a binary delta has an unknown instruction");
    }
  }
  if (produced !== target.value)
    throw new Error("a binary delta does not produce its declared size");
}
