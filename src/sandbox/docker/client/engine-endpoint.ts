import { createHash } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import path from "node:path";

import { z } from "zod";

import { ConfigError, messageOf } from "../../../common/index.js";

/** Where the engine address came from, for `doctor` and for every message about it. */
export type EngineSource =
  | { kind: "DOCKER_HOST" }
  | { kind: "context"; name: string; via: "DOCKER_CONTEXT" | "config" }
  | { kind: "default" }
  /** Given to `DockerEngine` by the caller (tests, embedders). */
  | { kind: "option" };

/** Client certificate material for a TLS engine (the docker CLI's ca.pem, cert.pem, key.pem). */
export interface EngineTls {
  /** The directory the files were read from; absent for an https:// address (the system's CAs). */
  directory?: string;
  /** Trusted CAs; absent: the system's. */
  ca?: Buffer;
  /** The client certificate and its key; absent: no client certificate is offered. */
  cert?: Buffer;
  key?: Buffer;
}

export type EngineTransport =
  | { kind: "unix"; socketPath: string }
  /** `tls` absent: plain HTTP, as `tcp://` is for the docker CLI without TLS settings. */
  | { kind: "tcp"; hostname: string; port: number; tls?: EngineTls }
  | { kind: "ssh"; hostname: string; port?: number; user?: string };

/** The Docker engine cordon talks to, resolved as the docker CLI resolves it. */
export interface EngineEndpoint {
  /** The address in DOCKER_HOST syntax. */
  host: string;
  source: EngineSource;
  transport: EngineTransport;
  /**
   * Whether the engine sees this host's files at the same paths, so a bind of a host path works.
   * Only a local unix socket is taken to; tcp and ssh engines are treated as elsewhere even on
   * loopback (an engine in a container or VM answers there too).
   */
  sharesFilesystem: boolean;
}

export interface ResolveEngineOptions {
  env: NodeJS.ProcessEnv;
  /** `$HOME`, where `~/.docker` is. */
  homeDirectory: string;
}

const defaultSocket = "/var/run/docker.sock";

/** The local engine, for callers that name none. */
export const defaultEngineEndpoint: EngineEndpoint = {
  host: `unix://${defaultSocket}`,
  source: { kind: "default" },
  transport: { kind: "unix", socketPath: defaultSocket },
  sharesFilesystem: true,
};

/**
 * The engine the docker CLI would talk to in `env`: `DOCKER_HOST` (with `DOCKER_TLS_VERIFY` and
 * `DOCKER_CERT_PATH`), else the context `DOCKER_CONTEXT` names, else the config's
 * `currentContext`, else the local socket — the CLI's order. Anything it cannot resolve is a
 * `ConfigError` naming the fix: falling back to the local socket would run the user's work on an
 * engine they did not choose.
 */
export function resolveEngineEndpoint(options: ResolveEngineOptions): EngineEndpoint {
  const { env } = options;
  const configDirectory = env["DOCKER_CONFIG"] || path.join(options.homeDirectory, ".docker");
  const dockerHost = env["DOCKER_HOST"];
  if (dockerHost) {
    return endpointOf(dockerHost, { kind: "DOCKER_HOST" }, tlsFromEnv(env, configDirectory));
  }
  const fromEnv = env["DOCKER_CONTEXT"];
  const context = fromEnv
    ? { name: fromEnv, via: "DOCKER_CONTEXT" as const }
    : currentContextOf(configDirectory);
  if (!context || context.name === "default") return defaultEngineEndpoint;
  return contextEndpoint(configDirectory, context.name, context.via);
}

/** `DockerEngine({ host })`: an address given directly, without TLS. */
export function endpointFromHost(host: string | undefined): EngineEndpoint {
  return host ? endpointOf(host, { kind: "option" }, { kind: "none" }) : defaultEngineEndpoint;
}

/** One line for `doctor` and messages: the address, TLS, and where it came from. */
export function describeEngineEndpoint(endpoint: EngineEndpoint): string {
  const tls = endpoint.transport.kind === "tcp" && endpoint.transport.tls ? " (TLS)" : "";
  return `${endpoint.host}${tls}, ${describeSource(endpoint.source)}`;
}

export function describeSource(source: EngineSource): string {
  switch (source.kind) {
    case "DOCKER_HOST":
      return "from DOCKER_HOST";
    case "context":
      return `docker context "${source.name}" (from ${source.via === "DOCKER_CONTEXT" ? "DOCKER_CONTEXT" : "the docker config's currentContext"})`;
    case "default":
      return "the default local socket";
    case "option":
      return "given by the caller";
  }
}

type TlsChoice = { kind: "none" } | { kind: "verify"; tls: EngineTls };

/**
 * DOCKER_TLS_VERIFY (any non-empty value, as the CLI reads it) turns TLS on, with the files of
 * DOCKER_CERT_PATH (default the docker config directory). DOCKER_CERT_PATH alone means TLS
 * without checking the engine's certificate to the CLI; cordon refuses that rather than send
 * commands to an engine it cannot identify.
 */
function tlsFromEnv(env: NodeJS.ProcessEnv, configDirectory: string): TlsChoice {
  const certPath = env["DOCKER_CERT_PATH"];
  if (env["DOCKER_TLS_VERIFY"]) {
    return { kind: "verify", tls: readTls(certPath || configDirectory, "DOCKER_CERT_PATH") };
  }
  if (certPath) {
    throw new ConfigError(
      "DOCKER_CERT_PATH is set without DOCKER_TLS_VERIFY: that is TLS without checking the engine's certificate, which cordon does not do",
      {
        fix: "export DOCKER_TLS_VERIFY=1 (with ca.pem, cert.pem and key.pem in DOCKER_CERT_PATH), or unset DOCKER_CERT_PATH for a plain tcp:// engine",
      },
    );
  }
  return { kind: "none" };
}

/** ca.pem, cert.pem and key.pem of `directory`, each optional as for the CLI; a lone half of a key pair is refused. */
function readTls(directory: string, setting: string): EngineTls {
  const read = (name: string): Buffer | undefined => {
    const file = path.join(directory, name);
    if (!existsSync(file)) return undefined;
    try {
      return readFileSync(file);
    } catch (error) {
      throw new ConfigError(`cannot read ${file}: ${messageOf(error)}`, {
        fix: `make ${file} readable, or point ${setting} at the directory with ca.pem, cert.pem and key.pem`,
      });
    }
  };
  const ca = read("ca.pem");
  const cert = read("cert.pem");
  const key = read("key.pem");
  if ((cert === undefined) !== (key === undefined)) {
    throw new ConfigError(
      `${directory} has ${cert ? "cert.pem but no key.pem" : "key.pem but no cert.pem"}`,
      {
        fix: `put the client certificate's cert.pem and key.pem together in ${directory} (${setting})`,
      },
    );
  }
  return {
    directory,
    ...(ca ? { ca } : {}),
    ...(cert && key ? { cert, key } : {}),
  };
}

const configFileSchema = z.object({ currentContext: z.string().optional() }).passthrough();

function currentContextOf(configDirectory: string): { name: string; via: "config" } | undefined {
  const file = path.join(configDirectory, "config.json");
  if (!existsSync(file)) return undefined;
  const parsed = configFileSchema.safeParse(parseJsonFile(file, "DOCKER_CONFIG"));
  if (!parsed.success) {
    throw new ConfigError(`${file} is not a docker config: ${parsed.error.issues[0]?.message}`, {
      fix: `repair ${file} (the docker CLI refuses it too), or set DOCKER_HOST`,
    });
  }
  const name = parsed.data.currentContext;
  return name ? { name, via: "config" } : undefined;
}

const contextMetaSchema = z.object({
  Name: z.string(),
  Endpoints: z.record(
    z.string(),
    z.object({ Host: z.string().optional(), SkipTLSVerify: z.boolean().optional() }).passthrough(),
  ),
});

/** The CLI's context store: `contexts/meta/<sha256 of the name>/meta.json`, TLS under `contexts/tls/`. */
function contextEndpoint(
  configDirectory: string,
  name: string,
  via: "DOCKER_CONTEXT" | "config",
): EngineEndpoint {
  const source: EngineSource = { kind: "context", name, via };
  const digest = createHash("sha256").update(name).digest("hex");
  const metaFile = path.join(configDirectory, "contexts", "meta", digest, "meta.json");
  const chosenBy =
    via === "DOCKER_CONTEXT"
      ? "DOCKER_CONTEXT"
      : `currentContext in ${configDirectory}/config.json`;
  if (!existsSync(metaFile)) {
    throw new ConfigError(
      `docker context "${name}" (${chosenBy}) does not exist in ${configDirectory}/contexts`,
      {
        fix: "run `docker context ls` and `docker context use NAME` (or set DOCKER_CONTEXT or DOCKER_HOST to an engine that exists)",
      },
    );
  }
  const parsed = contextMetaSchema.safeParse(parseJsonFile(metaFile, "DOCKER_CONFIG"));
  if (!parsed.success || parsed.data.Name !== name) {
    throw new ConfigError(`${metaFile} is not the docker context "${name}"`, {
      fix: `recreate it: \`docker context rm ${name}\` then \`docker context create ${name} --docker host=…\``,
    });
  }
  const docker = parsed.data.Endpoints["docker"];
  if (!docker?.Host) {
    throw new ConfigError(`docker context "${name}" has no Docker endpoint`, {
      fix: `give it one: \`docker context update ${name} --docker host=…\``,
    });
  }
  const tlsDirectory = path.join(configDirectory, "contexts", "tls", digest, "docker");
  let tls: TlsChoice = { kind: "none" };
  if (existsSync(tlsDirectory)) {
    if (docker.SkipTLSVerify) {
      throw new ConfigError(
        `docker context "${name}" skips verifying the engine's TLS certificate, which cordon does not do`,
        {
          fix: `give the context the engine's CA: \`docker context update ${name} --docker host=${docker.Host},ca=…,cert=…,key=…,skip-tls-verify=false\``,
        },
      );
    }
    tls = { kind: "verify", tls: readTls(tlsDirectory, `docker context "${name}"`) };
  }
  return endpointOf(docker.Host, source, tls);
}

function parseJsonFile(file: string, setting: string): unknown {
  try {
    return JSON.parse(readFileSync(file, "utf8")) as unknown;
  } catch (error) {
    throw new ConfigError(`cannot read ${file}: ${messageOf(error)}`, {
      fix: `repair or remove ${file}, or point ${setting} elsewhere`,
    });
  }
}

/** One address in DOCKER_HOST syntax (`host:port` alone is tcp, as for the CLI). */
function endpointOf(host: string, source: EngineSource, tls: TlsChoice): EngineEndpoint {
  const address = host.includes("://") ? host : `tcp://${host}`;
  const url = URL.canParse(address) ? new URL(address) : undefined;
  const refuse = (why: string): never => {
    throw new ConfigError(
      `${sourceSetting(source, host)} is not an engine address cordon can use: ${why}`,
      {
        fix: "use unix:///path/to/docker.sock, tcp://host:port (TLS with DOCKER_TLS_VERIFY=1 and DOCKER_CERT_PATH) or ssh://user@host, or unset it for the local socket",
      },
    );
  };
  if (!url) return refuse("it does not parse as a URL");
  switch (url.protocol) {
    case "unix:":
      if (!url.pathname || url.pathname === "/") return refuse("it names no socket");
      return {
        host: `unix://${url.pathname}`,
        source,
        transport: { kind: "unix", socketPath: decodeURIComponent(url.pathname) },
        sharesFilesystem: true,
      };
    case "tcp:":
    case "http:":
    case "https:": {
      if (!url.hostname) return refuse("it names no host");
      if (url.pathname !== "/" && url.pathname !== "")
        return refuse("cordon does not use a path prefix");
      const withTls = tls.kind === "verify" || url.protocol === "https:";
      const port = url.port ? Number(url.port) : withTls ? 2376 : 2375;
      const hostname = url.hostname.replace(/^\[|\]$/g, "");
      return {
        host: `tcp://${url.host}${url.port ? "" : `:${port}`}`,
        source,
        transport: {
          kind: "tcp",
          hostname,
          port,
          ...(tls.kind === "verify"
            ? { tls: tls.tls }
            : url.protocol === "https:"
              ? { tls: {} }
              : {}),
        },
        sharesFilesystem: false,
      };
    }
    case "ssh:": {
      if (!url.hostname) return refuse("it names no host");
      if (url.pathname !== "/" && url.pathname !== "")
        return refuse("an ssh:// address has no path");
      if (url.password)
        return refuse("a password in the address is not used; use an ssh key or agent");
      if (url.hostname.startsWith("-") || url.username.startsWith("-")) {
        return refuse("a host or user starting with '-' would be read as an ssh option");
      }
      return {
        host: `ssh://${url.username ? `${url.username}@` : ""}${url.host}`,
        source,
        transport: {
          kind: "ssh",
          hostname: url.hostname,
          ...(url.port ? { port: Number(url.port) } : {}),
          ...(url.username ? { user: decodeURIComponent(url.username) } : {}),
        },
        sharesFilesystem: false,
      };
    }
    default:
      return refuse(`${url.protocol.replace(/:$/, "")}:// is not supported`);
  }
}

function sourceSetting(source: EngineSource, host: string): string {
  if (source.kind === "context") return `docker context "${source.name}" (host ${host})`;
  return `DOCKER_HOST=${host}`;
}
