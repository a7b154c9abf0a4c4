import { spawn } from "node:child_process";
import { Agent, type ClientRequest } from "node:http";
import type { Socket } from "node:net";
import { Duplex } from "node:stream";

import { DockerUnavailableError } from "../../../common/index.js";

export interface SshTarget {
  hostname: string;
  port?: number | undefined;
  user?: string | undefined;
}

/** How long an idle connection (an ssh process) is kept for the next request, in ms. */
const idleConnectionMs = 15_000;

/**
 * An HTTP agent whose every connection is `ssh HOST docker system dial-stdio`: the docker CLI's
 * own ssh transport. cordon runs the user's `ssh` rather than dockerode's built-in ssh2 client
 * because that client accepts any host key (no known_hosts check: a man in the middle would get
 * the engine) and reads neither ~/.ssh/config (host aliases, ProxyJump, IdentityFile) nor keys
 * outside the agent. BatchMode: a password prompt would hang a run; keys and agents work.
 *
 * Connections are kept between requests: a new one costs an ssh handshake and a docker CLI start
 * on the engine's host (about 0.5 s on loopback; one `cordon exec` makes ~20 requests). An idle
 * one is unref'd (the agent does that; the socket passes it to the ssh process), so it never
 * keeps cordon from exiting, and ended after `idleConnectionMs`, so a long-lived process does not
 * hold ssh processes it no longer uses.
 */
export function sshDialAgent(target: SshTarget, env: NodeJS.ProcessEnv): Agent {
  return new SshDialAgent(target, env);
}

class SshDialAgent extends Agent {
  readonly #idle = new WeakMap<Duplex, NodeJS.Timeout>();

  constructor(target: SshTarget, env: NodeJS.ProcessEnv) {
    super({ keepAlive: true });
    // Node's agent accepts any Duplex from createConnection; it is not typed that way.
    (this as unknown as { createConnection: () => Duplex }).createConnection = () =>
      dialOverSsh(target, env);
  }

  override keepSocketAlive(socket: Duplex): boolean {
    // Typed void, returns whether the agent keeps it.
    const kept = (super.keepSocketAlive(socket) as unknown) !== false;
    if (kept) {
      const timer = setTimeout(() => socket.destroy(), idleConnectionMs);
      timer.unref();
      this.#idle.set(socket, timer);
    }
    return kept;
  }

  override reuseSocket(socket: Duplex, request: ClientRequest): void {
    clearTimeout(this.#idle.get(socket));
    this.#idle.delete(socket);
    super.reuseSocket(socket, request);
  }
}

/** The ssh command line; `--` ends options, and the endpoint refused a host or user starting with `-`. */
export function sshDialArgs(target: SshTarget): string[] {
  return [
    "-o",
    "BatchMode=yes",
    "-o",
    "ConnectTimeout=30",
    "-T",
    ...(target.user ? ["-l", target.user] : []),
    ...(target.port ? ["-p", String(target.port)] : []),
    "--",
    target.hostname,
    "docker",
    "system",
    "dial-stdio",
  ];
}

function dialOverSsh(target: SshTarget, env: NodeJS.ProcessEnv): Duplex {
  const child = spawn("ssh", sshDialArgs(target), { env, stdio: ["pipe", "pipe", "pipe"] });
  let stderr = "";
  child.stderr.setEncoding("utf8");
  child.stderr.on("data", (text: string) => {
    stderr = (stderr + text).slice(-2000);
  });
  const where = `ssh://${target.user ? `${target.user}@` : ""}${target.hostname}${target.port ? `:${target.port}` : ""}`;
  const failure = (why: string, cause?: unknown) =>
    new DockerUnavailableError(`cannot reach the Docker engine at ${where}: ${why}`, {
      fix: "check that `ssh HOST docker version` works without a prompt (a key in ssh-agent or ~/.ssh/config, the host in known_hosts, docker installed there), or point DOCKER_HOST elsewhere",
      cause,
    });
  // A write into an ssh that has died fails with EPIPE before its exit is known; the exit (the
  // "close" handler below) says why, so a failed write waits for it instead of reporting EPIPE.
  const exited = new Promise<void>((resolve) => child.once("close", () => resolve()));
  const afterWrite = (done: (error?: Error | null) => void) => (error?: Error | null) => {
    if (error) void exited.then(() => done());
    else done();
  };
  const socket = new Duplex({
    read: () => {
      child.stdout.resume();
    },
    write: (chunk: Buffer, _encoding, done) => {
      child.stdin.write(chunk, afterWrite(done));
    },
    final: (done) => {
      child.stdin.end(afterWrite(done));
    },
    destroy: (error, done) => {
      if (child.exitCode === null && child.signalCode === null) child.kill();
      done(error);
    },
  });
  child.stdout.on("data", (chunk: Buffer) => {
    if (!socket.push(chunk)) child.stdout.pause();
  });
  // The stream ends only once ssh's exit status is known ("close": exited, stdio drained): a
  // failed ssh (host key, auth, no docker there) is then an error saying what ssh said, not a
  // bare "socket hang up".
  child.on("close", (code, signal) => {
    if (code === 0 || (signal !== null && socket.destroyed)) socket.push(null);
    else {
      const said = stderr.trim().split("\n").slice(-3).join(" ");
      socket.destroy(failure(`ssh exited ${code ?? signal}${said ? `: ${said}` : ""}`));
    }
  });
  child.on("error", (error) =>
    socket.destroy(failure(`ssh did not start (${error.message}); is OpenSSH installed?`, error)),
  );
  child.stdin.on("error", () => undefined); // a write after ssh died: "close" reports why
  // ref/unref reach the ssh process and its pipes: an idle executor stream is unref'd so that
  // cordon can exit while it stays open (container-exec.ts keepAlive), as a TCP socket is.
  // The pipes of a spawned process are net.Sockets, though typed as plain streams.
  const handles = [child, child.stdin, child.stdout, child.stderr] as unknown as Pick<
    Socket,
    "ref" | "unref"
  >[];
  // What http's client and agent may call on a socket; a pipe to ssh has no other such knobs.
  Object.assign(socket, {
    setTimeout: () => socket,
    setNoDelay: () => socket,
    setKeepAlive: () => socket,
    ref: () => {
      for (const handle of handles) handle.ref();
      return socket;
    },
    unref: () => {
      for (const handle of handles) handle.unref();
      return socket;
    },
  });
  return socket;
}
