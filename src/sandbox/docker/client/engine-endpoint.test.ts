import { createHash } from "node:crypto";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";

import { afterEach, beforeEach, describe, expect, it } from "vitest";

import { ConfigError } from "../../../common/index.js";
import {
  describeEngineEndpoint,
  resolveEngineEndpoint,
  type EngineEndpoint,
} from "./engine-endpoint.js";

let home: string;
beforeEach(() => {
  home = mkdtempSync(path.join(os.tmpdir(), "cordon-endpoint-"));
});
afterEach(() => rmSync(home, { recursive: true, force: true }));

const resolve = (env: NodeJS.ProcessEnv): EngineEndpoint =>
  resolveEngineEndpoint({ env, homeDirectory: home });

function configError(env: NodeJS.ProcessEnv): ConfigError {
  try {
    resolve(env);
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigError);
    return error as ConfigError;
  }
  throw new Error("resolved, though it should not have");
}

function writeCerts(directory: string, files: string[] = ["ca.pem", "cert.pem", "key.pem"]): void {
  mkdirSync(directory, { recursive: true });
  for (const file of files) writeFileSync(path.join(directory, file), `PEM ${file}\n`);
}

/** A context as `docker context create NAME --docker host=…[,ca=…,cert=…,key=…]` writes it. */
function writeContext(
  configDirectory: string,
  name: string,
  host: string,
  options: { tls?: boolean; skipTlsVerify?: boolean } = {},
): void {
  const digest = createHash("sha256").update(name).digest("hex");
  const meta = path.join(configDirectory, "contexts", "meta", digest);
  mkdirSync(meta, { recursive: true });
  writeFileSync(
    path.join(meta, "meta.json"),
    JSON.stringify({
      Name: name,
      Metadata: {},
      Endpoints: { docker: { Host: host, SkipTLSVerify: options.skipTlsVerify ?? false } },
    }),
  );
  if (options.tls) writeCerts(path.join(configDirectory, "contexts", "tls", digest, "docker"));
}

function useContext(configDirectory: string, name: string): void {
  mkdirSync(configDirectory, { recursive: true });
  writeFileSync(
    path.join(configDirectory, "config.json"),
    JSON.stringify({ auths: {}, currentContext: name }, null, "\t"),
  );
}

describe("resolveEngineEndpoint", () => {
  it("is the local socket when nothing names an engine, and the default context is that too", () => {
    expect(resolve({})).toMatchObject({
      host: "unix:///var/run/docker.sock",
      source: { kind: "default" },
      sharesFilesystem: true,
    });
    useContext(path.join(home, ".docker"), "default");
    expect(resolve({}).source).toEqual({ kind: "default" });
    expect(resolve({ DOCKER_CONTEXT: "default" }).source).toEqual({ kind: "default" });
  });

  it("reads DOCKER_HOST: unix, plain tcp, bare host:port, ssh", () => {
    expect(resolve({ DOCKER_HOST: "unix:///run/user/1000/docker.sock" })).toMatchObject({
      transport: { kind: "unix", socketPath: "/run/user/1000/docker.sock" },
      source: { kind: "DOCKER_HOST" },
      sharesFilesystem: true,
    });
    expect(resolve({ DOCKER_HOST: "tcp://10.0.0.5:2375" })).toEqual({
      host: "tcp://10.0.0.5:2375",
      source: { kind: "DOCKER_HOST" },
      transport: { kind: "tcp", hostname: "10.0.0.5", port: 2375 },
      sharesFilesystem: false,
    });
    expect(resolve({ DOCKER_HOST: "build-box:2375" }).transport).toEqual({
      kind: "tcp",
      hostname: "build-box",
      port: 2375,
    });
    expect(resolve({ DOCKER_HOST: "ssh://dev@build-box:2222" })).toMatchObject({
      host: "ssh://dev@build-box:2222",
      transport: { kind: "ssh", hostname: "build-box", port: 2222, user: "dev" },
      sharesFilesystem: false,
    });
    expect(resolve({ DOCKER_HOST: "ssh://build-box" }).transport).toEqual({
      kind: "ssh",
      hostname: "build-box",
    });
  });

  it("takes TLS from DOCKER_TLS_VERIFY and DOCKER_CERT_PATH (default the docker config directory)", () => {
    const certs = path.join(home, "certs");
    writeCerts(certs);
    const endpoint = resolve({
      DOCKER_HOST: "tcp://engine.example:2376",
      DOCKER_TLS_VERIFY: "1",
      DOCKER_CERT_PATH: certs,
    });
    expect(endpoint.transport).toMatchObject({ kind: "tcp", port: 2376 });
    const tls = endpoint.transport.kind === "tcp" ? endpoint.transport.tls : undefined;
    expect(tls?.directory).toBe(certs);
    expect(tls?.ca?.toString()).toBe("PEM ca.pem\n");
    expect(tls?.cert?.toString()).toBe("PEM cert.pem\n");
    expect(tls?.key?.toString()).toBe("PEM key.pem\n");
    expect(describeEngineEndpoint(endpoint)).toBe(
      "tcp://engine.example:2376 (TLS), from DOCKER_HOST",
    );

    writeCerts(path.join(home, ".docker"));
    const fromConfigDirectory = resolve({ DOCKER_HOST: "tcp://e:2376", DOCKER_TLS_VERIFY: "1" });
    expect(
      fromConfigDirectory.transport.kind === "tcp" && fromConfigDirectory.transport.tls?.directory,
    ).toBe(path.join(home, ".docker"));
    // TLS on without a port: the TLS port.
    expect(resolve({ DOCKER_HOST: "tcp://e", DOCKER_TLS_VERIFY: "1" }).host).toBe("tcp://e:2376");
    // TLS settings mean nothing to a unix socket or ssh.
    expect(resolve({ DOCKER_HOST: "ssh://e", DOCKER_TLS_VERIFY: "1" }).transport.kind).toBe("ssh");
  });

  it("refuses TLS it cannot verify, and half a key pair", () => {
    const certs = path.join(home, "certs");
    writeCerts(certs);
    const unverified = configError({ DOCKER_HOST: "tcp://e:2376", DOCKER_CERT_PATH: certs });
    expect(unverified.message).toContain("without DOCKER_TLS_VERIFY");
    expect(unverified.fix).toContain("DOCKER_TLS_VERIFY=1");

    const half = path.join(home, "half");
    writeCerts(half, ["ca.pem", "cert.pem"]);
    const error = configError({
      DOCKER_HOST: "tcp://e:2376",
      DOCKER_TLS_VERIFY: "1",
      DOCKER_CERT_PATH: half,
    });
    expect(error.message).toBe(`${half} has cert.pem but no key.pem`);
  });

  it("refuses addresses it cannot use, naming what to set", () => {
    for (const host of [
      "npipe:////./pipe/docker_engine",
      "fd://",
      "tcp://e:2375/prefix",
      "ssh://-oProxyCommand=evil",
      "ssh://me:secret@box",
      "unix://",
    ]) {
      const error = configError({ DOCKER_HOST: host });
      expect(error.message).toContain(`DOCKER_HOST=${host}`);
      expect(error.fix).toMatch(/unix:\/\/.*tcp:\/\/.*ssh:\/\//);
    }
  });

  it("follows the current context of config.json, or DOCKER_CONTEXT over it, with its TLS material", () => {
    const config = path.join(home, ".docker");
    writeContext(config, "box", "tcp://box.example:2376", { tls: true });
    writeContext(config, "other", "ssh://me@other");
    useContext(config, "box");
    const endpoint = resolve({});
    expect(endpoint).toMatchObject({
      host: "tcp://box.example:2376",
      source: { kind: "context", name: "box", via: "config" },
      transport: { kind: "tcp", hostname: "box.example", port: 2376 },
      sharesFilesystem: false,
    });
    expect(endpoint.transport.kind === "tcp" && endpoint.transport.tls?.key?.toString()).toBe(
      "PEM key.pem\n",
    );
    expect(describeEngineEndpoint(endpoint)).toBe(
      `tcp://box.example:2376 (TLS), docker context "box" (from the docker config's currentContext)`,
    );
    expect(resolve({ DOCKER_CONTEXT: "other" })).toMatchObject({
      source: { kind: "context", name: "other", via: "DOCKER_CONTEXT" },
      transport: { kind: "ssh", hostname: "other", user: "me" },
    });
    // DOCKER_HOST wins over any context, as for the docker CLI.
    expect(resolve({ DOCKER_HOST: "unix:///x.sock", DOCKER_CONTEXT: "other" }).source).toEqual({
      kind: "DOCKER_HOST",
    });
  });

  it("reads the config directory DOCKER_CONFIG names", () => {
    const config = path.join(home, "elsewhere");
    writeContext(config, "ci", "tcp://ci-docker:2375");
    useContext(config, "ci");
    expect(resolve({ DOCKER_CONFIG: config }).host).toBe("tcp://ci-docker:2375");
    expect(resolve({}).source).toEqual({ kind: "default" });
  });

  it("never falls back to the local socket for a context it cannot resolve", () => {
    const config = path.join(home, ".docker");
    useContext(config, "gone");
    const missing = configError({});
    expect(missing.message).toBe(
      `docker context "gone" (currentContext in ${config}/config.json) does not exist in ${config}/contexts`,
    );
    expect(missing.fix).toContain("docker context use");
    expect(configError({ DOCKER_CONTEXT: "nope" }).message).toContain('"nope" (DOCKER_CONTEXT)');

    writeContext(config, "insecure", "tcp://e:2376", { tls: true, skipTlsVerify: true });
    expect(configError({ DOCKER_CONTEXT: "insecure" }).message).toContain("skips verifying");

    writeFileSync(path.join(config, "config.json"), "{ not json");
    expect(configError({}).message).toContain("config.json");

    const digest = createHash("sha256").update("broken").digest("hex");
    mkdirSync(path.join(config, "contexts", "meta", digest), { recursive: true });
    writeFileSync(path.join(config, "contexts", "meta", digest, "meta.json"), '{"Name":"other"}');
    expect(configError({ DOCKER_CONTEXT: "broken" }).message).toContain(
      'is not the docker context "broken"',
    );
  });
});
