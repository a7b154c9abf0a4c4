import { describe, expect, it } from "vitest";

import { allowedHostsFor, checkRequest, parseListenAddress } from "./http-guard.js";

describe("--http [HOST:]PORT", () => {
  it("listens on loopback unless a host is named", () => {
    expect(parseListenAddress("8765")).toEqual({ host: "127.0.0.1", port: 8765 });
    expect(parseListenAddress("0.0.0.0:80")).toEqual({ host: "0.0.0.0", port: 80 });
    expect(parseListenAddress("[::1]:0")).toEqual({ host: "::1", port: 0 });
    expect(parseListenAddress("localhost:9000")).toEqual({ host: "localhost", port: 9000 });
  });

  it("refuses what is not an address and a port, naming the form", () => {
    for (const bad of ["", "http://x:1", "example.com:80", "1:2:3", "70000", "::1:80", "host:"]) {
      expect(() => parseListenAddress(bad), bad).toThrow(/\[HOST:\]PORT|not an IP address/);
    }
  });
});

describe("checkRequest", () => {
  const options = {
    token: "s3cret-token-0123456789",
    allowedHosts: allowedHostsFor({ host: "127.0.0.1", port: 0 }, 8765),
  };
  const bearer = `Bearer ${options.token}`;

  it("lets a loopback client with the token through, by any loopback name", () => {
    for (const host of ["127.0.0.1:8765", "localhost:8765", "[::1]:8765", "LOCALHOST:8765"]) {
      expect(checkRequest({ host, authorization: bearer }, options), host).toBeUndefined();
    }
    expect(
      checkRequest(
        { host: "127.0.0.1:8765", origin: "http://localhost:8765", authorization: bearer },
        options,
      ),
    ).toBeUndefined();
  });

  it("refuses a request without the right token with 401", () => {
    for (const authorization of [
      undefined,
      "",
      "Bearer",
      "Bearer wrong",
      `Basic ${options.token}`,
    ]) {
      expect(checkRequest({ host: "127.0.0.1:8765", authorization }, options)?.status).toBe(401);
    }
  });

  it("refuses a foreign Host or Origin with 403, token or not (DNS rebinding)", () => {
    const cases = [
      { host: "evil.example:8765" },
      { host: "127.0.0.1:9999" },
      { host: undefined },
      { host: "127.0.0.1:8765", origin: "http://evil.example:8765" },
      { host: "127.0.0.1:8765", origin: "https://localhost:8765" },
      { host: "127.0.0.1:8765", origin: "http://localhost" },
      { host: "127.0.0.1:8765", origin: "null" },
      { host: "127.0.0.1:8765", origin: "not a url" },
    ];
    for (const headers of cases) {
      expect(
        checkRequest({ ...headers, authorization: bearer }, options)?.status,
        JSON.stringify(headers),
      ).toBe(403);
    }
  });

  it("answers only to the address it listens on when it is not loopback", () => {
    const hosts = allowedHostsFor({ host: "10.1.2.3", port: 80 }, 80);
    expect(hosts).toEqual(["10.1.2.3:80"]);
    expect(allowedHostsFor({ host: "::1", port: 1 }, 1)).toContain("[::1]:1");
  });
});
