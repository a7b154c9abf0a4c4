import { describe, expect, it } from "vitest";

import { SandboxError } from "../../common/index.js";
import { engineStatusOf, toSandboxError } from "./docker-errors.js";

describe("engineStatusOf", () => {
  it("finds the engine's status through the errors that wrap it, and none where there is none", () => {
    const engine = Object.assign(new Error("container stopped/paused"), { statusCode: 409 });
    const fromClient = toSandboxError(engine, "start a command in abc");
    const fromCaller = new SandboxError("the sandbox is gone", { cause: fromClient });
    expect(engineStatusOf(engine)).toBe(409);
    expect(engineStatusOf(fromClient)).toBe(409);
    expect(engineStatusOf(fromCaller)).toBe(409);
    expect(engineStatusOf(new SandboxError("no engine involved"))).toBeUndefined();
    expect(engineStatusOf("not an error")).toBeUndefined();
  });
});

describe("toSandboxError on a TLS engine", () => {
  it("names TLS when plain HTTP reached an HTTPS engine (what dockerd answers then)", () => {
    // As docker-modem reports Go's plain-text answer: the body in the message, a Buffer as json.
    const body = "Client sent an HTTP request to an HTTPS server.\n";
    const engine = Object.assign(new Error(`(HTTP code 400) unexpected - ${body} `), {
      statusCode: 400,
      json: Buffer.from(body),
    });
    const error = toSandboxError(engine, "answer a ping");
    expect(error.code).toBe("docker_unavailable");
    expect(error.message).toBe(
      "the Docker engine speaks TLS, and cordon spoke plain HTTP to it while trying to answer a ping",
    );
    expect(error.fix).toMatch(/DOCKER_TLS_VERIFY=1 and DOCKER_CERT_PATH=/);
  });

  it("says the TLS handshake failed, with what to check, for Node's certificate errors", () => {
    for (const code of [
      "UNABLE_TO_VERIFY_LEAF_SIGNATURE",
      "ERR_TLS_CERT_ALTNAME_INVALID",
      "EPROTO",
    ]) {
      const error = toSandboxError(
        Object.assign(new Error("bad cert"), { code }),
        "list containers",
      );
      expect(error.code).toBe("docker_unavailable");
      expect(error.message).toContain(`the TLS connection to the Docker engine failed (${code}`);
      expect(error.fix).toMatch(/ca\.pem must be the CA/);
    }
  });
});
