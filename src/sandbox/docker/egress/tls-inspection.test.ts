import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { createServer, type Server } from "node:tls";

import { afterAll, beforeAll, describe, expect, it } from "vitest";

import { detectTlsInspection } from "./tls-inspection.js";

/** A CA of its own and a server certificate for `localhost` it signed, made with openssl. */
function makeCertificates(directory: string, caName: string) {
  const file = (name: string) => path.join(directory, `${caName}-${name}`);
  const openssl = (...args: string[]) => execFileSync("openssl", args, { stdio: "pipe" });
  openssl(
    ...["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", `/CN=${caName}`],
    ...["-keyout", file("ca.key"), "-out", file("ca.crt")],
  );
  openssl(
    ...["req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=localhost"],
    ...["-keyout", file("server.key"), "-out", file("server.csr")],
  );
  writeFileSync(file("ext"), "subjectAltName=DNS:localhost\n");
  openssl(
    ...["x509", "-req", "-in", file("server.csr"), "-CA", file("ca.crt"), "-CAkey", file("ca.key")],
    ...["-CAcreateserial", "-days", "2", "-extfile", file("ext"), "-out", file("server.crt")],
  );
  return {
    caFile: file("ca.crt"),
    ca: readFileSync(file("ca.crt"), "utf8"),
    key: readFileSync(file("server.key"), "utf8"),
    cert: readFileSync(file("server.crt"), "utf8"),
  };
}

/**
 * A loopback TLS server stands in for a network that re-signs HTTPS with its own CA: the host's
 * bundle is a file holding that CA, the sandbox's roots are Node's public ones.
 */
describe("detectTlsInspection", () => {
  let directory: string;
  let inspecting: ReturnType<typeof makeCertificates>;
  let other: ReturnType<typeof makeCertificates>;
  let server: Server;
  let port: number;

  beforeAll(async () => {
    directory = mkdtempSync(path.join(tmpdir(), "cordon-tls-"));
    inspecting = makeCertificates(directory, "Example Inspecting CA");
    other = makeCertificates(directory, "Unrelated CA");
    server = createServer({ key: inspecting.key, cert: inspecting.cert }, (socket) => socket.end());
    await new Promise<void>((resolve) => server.listen(0, "localhost", resolve));
    port = (server.address() as AddressInfo).port;
  });

  afterAll(async () => {
    await new Promise((resolve) => server.close(resolve));
    rmSync(directory, { recursive: true, force: true });
  });

  it("names the inspecting CA and the host bundle that trusts it", async () => {
    await expect(
      detectTlsInspection("localhost", { port, bundleCandidates: [inspecting.caFile] }),
    ).resolves.toEqual({
      host: "localhost",
      issuer: "Example Inspecting CA",
      bundle: inspecting.caFile,
    });
  });

  it("takes the first host bundle that exists", async () => {
    const missing = path.join(directory, "no-such-bundle.crt");
    const found = await detectTlsInspection("localhost", {
      port,
      bundleCandidates: [missing, inspecting.caFile],
    });
    expect(found?.bundle).toBe(inspecting.caFile);
  });

  it("says nothing when the sandbox's own roots already trust the chain", async () => {
    await expect(
      detectTlsInspection("localhost", {
        port,
        bundleCandidates: [inspecting.caFile],
        publicRoots: [inspecting.ca],
      }),
    ).resolves.toBeUndefined();
  });

  it("says nothing when the host's bundle does not trust it either (mounting it would not help)", async () => {
    await expect(
      detectTlsInspection("localhost", { port, bundleCandidates: [other.caFile] }),
    ).resolves.toBeUndefined();
  });

  it("says nothing without a host bundle, or when the host does not answer", async () => {
    await expect(
      detectTlsInspection("localhost", {
        port,
        bundleCandidates: [path.join(directory, "none.crt")],
      }),
    ).resolves.toBeUndefined();
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, "localhost", resolve));
    const closedPort = (closed.address() as AddressInfo).port;
    await new Promise((resolve) => closed.close(resolve));
    await expect(
      detectTlsInspection("localhost", { port: closedPort, bundleCandidates: [inspecting.caFile] }),
    ).resolves.toBeUndefined();
  });
});
