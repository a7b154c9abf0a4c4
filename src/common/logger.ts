import { pino, type Logger as PinoLogger, type DestinationStream } from "pino";

/** The logger every module takes; a pino logger, so `child()` binds context fields. */
export type Logger = PinoLogger;

export const logLevels = ["fatal", "error", "warn", "info", "debug", "trace", "silent"] as const;
export type LogLevel = (typeof logLevels)[number];

export interface LoggerOptions {
  /** Default "info"; `CORDON_LOG_LEVEL` is read by the CLI, never here. */
  level?: LogLevel | undefined;
  /** Pretty, human output (default: when stderr is a TTY). Otherwise one JSON object a line. */
  pretty?: boolean | undefined;
  /** Colours in pretty output (default true; the CLI turns them off for NO_COLOR). */
  color?: boolean | undefined;
  /** Where lines go; default stderr, since stdout carries only results (DESIGN.md §7). */
  destination?: DestinationStream | undefined;
}

/**
 * Field paths whose values never reach a log line. Covers the places secrets travel in cordon:
 * API keys and auth headers of the model client, and environment maps handed to sandboxes.
 */
export const redactedPaths: readonly string[] = [
  "apiKey",
  "*.apiKey",
  "authorization",
  "*.authorization",
  "headers.authorization",
  "headers['x-api-key']",
  "*.headers.authorization",
  "*.headers['x-api-key']",
  "token",
  "*.token",
  "password",
  "*.password",
  "secret",
  "*.secret",
  "env",
  "*.env",
];

export function createLogger(options: LoggerOptions = {}): Logger {
  const level = options.level ?? "info";
  const redact = { paths: [...redactedPaths], censor: "[redacted]" };
  if (options.destination) {
    return pino({ level, redact, base: null }, options.destination);
  }
  const pretty = options.pretty ?? process.stderr.isTTY;
  if (pretty) {
    return pino({
      level,
      redact,
      base: null,
      transport: {
        target: "pino-pretty",
        options: {
          destination: 2,
          colorize: options.color ?? true,
          ignore: "pid,hostname",
          translateTime: "HH:MM:ss",
        },
      },
    });
  }
  return pino({ level, redact, base: null }, pino.destination({ fd: 2, sync: true }));
}

/** A logger that drops everything; for tests and embedders who bring none. */
export function createSilentLogger(): Logger {
  return pino({ level: "silent" });
}
