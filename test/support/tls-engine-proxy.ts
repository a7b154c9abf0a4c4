import { execFile } from "node:child_process";
import { copyFile, mkdir, readFile, writeFile } from "node:fs/promises";
import net from "node:net";
import path from "node:path";
import tls from "node:tls";
import { promisify } from "node:util";

const run = promisify(execFile);

/** A CA, a server certificate for 127.0.0.1 and a client certificate, as `dockerd --tlsverify` uses them. */
export interface EngineCertificates {
  /** ca.pem, cert.pem and key.pem of the client: a DOCKER_CERT_PATH. */
  clientDirectory: string;
  ca: Buffer;
  serverCert: Buffer;
  serverKey: Buffer;
}

/** Made with openssl, in `directory`: a real chain, so every check Node makes is made. */
export async function makeEngineCertificates(directory: string): Promise<EngineCertificates> {
  const clientDirectory = path.join(directory, "client");
  await mkdir(clientDirectory, { recursive: true });
  const at = (name: string) => path.join(directory, name);
  const openssl = (...args: string[]) => run("openssl", args, { cwd: directory });
  await openssl(
    "req",
    "-x509",
    "-newkey",
    "rsa:2048",
    "-nodes",
    "-days",
    "2",
    "-subj",
    "/CN=test engine CA",
    "-keyout",
    at("ca-key.pem"),
    "-out",
    path.join(clientDirectory, "ca.pem"),
  );
  const sign = async (name: string, subject: string, extensions: string) => {
    await openssl(
      "req",
      "-newkey",
      "rsa:2048",
      "-nodes",
      "-subj",
      subject,
      "-keyout",
      at(`${name}-key.pem`),
      "-out",
      at(`${name}.csr`),
    );
    await writeFile(at(`${name}.ext`), extensions);
    await openssl(
      "x509",
      "-req",
      "-days",
      "2",
      "-in",
      at(`${name}.csr`),
      "-CA",
      path.join(clientDirectory, "ca.pem"),
      "-CAkey",
      at("ca-key.pem"),
      "-CAcreateserial",
      "-extfile",
      at(`${name}.ext`),
      "-out",
      at(`${name}.pem`),
    );
  };
  await sign(
    "server",
    "/CN=127.0.0.1",
    "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n",
  );
  await sign("client", "/CN=cordon test client", "extendedKeyUsage=clientAuth\n");
  await copyFile(at("client.pem"), path.join(clientDirectory, "cert.pem"));
  await copyFile(at("client-key.pem"), path.join(clientDirectory, "key.pem"));
  return {
    clientDirectory,
    ca: await readFile(path.join(clientDirectory, "ca.pem")),
    serverCert: await readFile(at("server.pem")),
    serverKey: await readFile(at("server-key.pem")),
  };
}

export interface TlsEngineProxy {
  /** `tcp://127.0.0.1:PORT`, a DOCKER_HOST. */
  host: string;
  /** Connections that passed the TLS handshake with a client certificate the CA signed. */
  readonly accepted: number;
  close(): Promise<void>;
}

/**
 * A TLS endpoint in front of the local engine's socket that insists on a client certificate, as
 * `dockerd --tlsverify` does: the engine itself is left as it is.
 */
export async function startTlsEngineProxy(
  certificates: EngineCertificates,
  socketPath = "/var/run/docker.sock",
): Promise<TlsEngineProxy> {
  let accepted = 0;
  const sockets = new Set<net.Socket>();
  const server = tls.createServer(
    {
      ca: certificates.ca,
      cert: certificates.serverCert,
      key: certificates.serverKey,
      requestCert: true,
      rejectUnauthorized: true,
    },
    (client) => {
      accepted += 1;
      const engine = net.connect(socketPath);
      sockets.add(client).add(engine);
      client.pipe(engine).pipe(client);
      const end = () => {
        client.destroy();
        engine.destroy();
      };
      client.on("error", end).on("close", end);
      engine.on("error", end).on("close", end);
    },
  );
  server.on("tlsClientError", () => undefined);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as net.AddressInfo;
  return {
    host: `tcp://127.0.0.1:${port}`,
    get accepted() {
      return accepted;
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}
