import type { TerminalOutput } from "./output-streams.js";

/** "5m ago", "3h ago", "2d ago". */
export function ago(iso: string, now = Date.now()): string {
  const seconds = Math.max(0, Math.round((now - Date.parse(iso)) / 1000));
  if (!Number.isFinite(seconds)) return "?";
  if (seconds < 60) return `${seconds}s ago`;
  if (seconds < 3600) return `${Math.floor(seconds / 60)}m ago`;
  if (seconds < 86_400) return `${Math.floor(seconds / 3600)}h ago`;
  return `${Math.floor(seconds / 86_400)}d ago`;
}

/** Left-aligned columns, two spaces apart. */
export function formatTable(header: string[], rows: string[][]): string {
  const widths = header.map((title, column) =>
    Math.max(title.length, ...rows.map((row) => (row[column] ?? "").length)),
  );
  const line = (cells: string[]): string =>
    cells
      .map((cell, column) => cell.padEnd(widths[column] ?? 0))
      .join("  ")
      .trimEnd();
  return `${[line(header), ...rows.map(line)].join("\n")}\n`;
}

/** What `fitTable` may do to fit a terminal. */
export interface FitOptions {
  /** The terminal's columns; undefined = no limit (a pipe or a file gets every column whole). */
  width: number | undefined;
  /** Headers of the columns to leave out first, least useful first, until the table fits. */
  dropFirst: readonly string[];
  /**
   * Columns cut to this many characters before any is left out (a long free-text column, such
   * as what a run is doing, gives way before a short figure does).
   */
  cutFirst?: Readonly<Record<string, number>> | undefined;
}

/**
 * The width a table on stdout is fitted to: the terminal's, or none (every column whole) with
 * `--wide` or when stdout is a pipe or a file, which a script reads whole.
 */
export function tableWidth(
  terminal: TerminalOutput | undefined,
  wide: boolean | undefined,
): number | undefined {
  return wide || !terminal?.stdout ? undefined : terminal.columns();
}

/** A cell is never cut shorter than this: a stub of a name says nothing. */
const minimumCellWidth = 12;

function widthOf(header: string[], rows: string[][]): number {
  return header.reduce(
    (sum, title, column) =>
      sum + Math.max(title.length, ...rows.map((row) => (row[column] ?? "").length)) + 2,
    -2,
  );
}

/**
 * `formatTable` fitted to a terminal's width, as `gh` and `kubectl` fit theirs: the least useful
 * columns go first, then the widest column's cells are cut with "…". `--wide` (no width) shows all.
 */
export function fitTable(header: string[], rows: string[][], options: FitOptions): string {
  const { width } = options;
  if (width === undefined) return formatTable(header, rows);
  let kept = header.map((_title, column) => column);
  let shownRows = rows;
  const shown = (): [string[], string[][]] => [
    kept.map((column) => header[column] ?? ""),
    shownRows.map((row) => kept.map((column) => row[column] ?? "")),
  ];
  if (options.cutFirst && widthOf(...shown()) > width) {
    const limits = header.map((title) => options.cutFirst?.[title]);
    shownRows = rows.map((row) => row.map((cell, column) => cutCell(cell, limits[column])));
  }
  for (const title of options.dropFirst) {
    if (widthOf(...shown()) <= width) break;
    kept = kept.filter((column) => header[column] !== title);
  }
  const [titles, cells] = shown();
  const excess = widthOf(titles, cells) - width;
  if (excess <= 0) return formatTable(titles, cells);
  const widths = titles.map((title, column) =>
    Math.max(title.length, ...cells.map((row) => (row[column] ?? "").length)),
  );
  const widest = widths.indexOf(Math.max(...widths));
  const limit = Math.max(minimumCellWidth, (widths[widest] ?? 0) - excess);
  const cut = cells.map((row) =>
    row.map((cell, column) => (column === widest ? cutCell(cell, limit) : cell)),
  );
  return formatTable(titles, cut);
}

/** `cell` in at most `limit` characters, its end replaced by "…" when cut. */
function cutCell(cell: string, limit: number | undefined): string {
  return limit !== undefined && cell.length > limit ? `${cell.slice(0, limit - 1)}…` : cell;
}

/**
 * `text` broken at spaces into lines of at most `width` characters, each after the first indented
 * by `indent` spaces (a sentence beside a label keeps to its column). A word longer than a line (a
 * path) is kept whole; the terminal wraps it. No width (a pipe): one line, as written.
 */
export function wrapText(text: string, width: number | undefined, indent: number): string {
  const room = width === undefined ? Infinity : width - indent;
  // Too narrow to read as a column: let the terminal wrap it.
  if (room < 20) return text;
  const lines: string[] = [];
  let line = "";
  for (const word of text.split(" ")) {
    if (line !== "" && line.length + 1 + word.length > room) {
      lines.push(line);
      line = word;
    } else {
      line = line === "" ? word : `${line} ${word}`;
    }
  }
  lines.push(line);
  return lines.join(`\n${" ".repeat(indent)}`);
}
