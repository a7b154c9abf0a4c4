import { describe, expect, it } from "vitest";

import { parseEgressLine } from "./access-log.js";
import { squidConfig } from "./squid-config.js";
import { upstreamProxyFromEnv } from "./upstream-proxy.js";

describe("egress proxy configuration", () => {
  it("admits exactly the allowed names, CONNECT only to 443, never by reverse DNS", () => {
    const config = squidConfig({
      allow: ["*.pythonhosted.org", "registry.npmjs.org"],
      proxyPort: 3128,
    });
    expect(config).toContain(
      "acl allowed_hosts dstdom_regex -n -i ^.+\\.pythonhosted\\.org$ ^registry\\.npmjs\\.org$",
    );
    const access = config.split("\n").filter((line) => line.startsWith("http_access"));
    // `to_localhost` resolves the name: only after the allowlist, or a refused name leaks as a
    // DNS query (egress-dns.integration.test.ts).
    expect(access).toEqual([
      "http_access deny CONNECT !https_port",
      "http_access deny !CONNECT !http_port",
      "http_access deny !allowed_hosts",
      "http_access deny to_localhost",
      "http_access allow allowed_hosts",
      "http_access deny all",
    ]);
    expect(config).not.toContain("cache_peer");
  });

  it("an empty list (the model gateway's network only) admits no host at all", () => {
    const config = squidConfig({ allow: [], proxyPort: 3128 });
    expect(config).not.toContain("allowed_hosts");
    expect(
      config
        .split("\n")
        .filter((line) => line.startsWith("http_access"))
        .at(-1),
    ).toBe("http_access deny all");
    expect(config.split("\n").filter((line) => line.startsWith("http_access allow"))).toEqual([]);
  });

  it("goes through the host's upstream proxy, direct only for its NO_PROXY hosts", () => {
    const upstream = upstreamProxyFromEnv({
      HTTPS_PROXY: "http://user:p%40ss@proxy.corp.example:8080",
      NO_PROXY: "internal.example, .corp.example,*.lan, bad entry;",
    });
    expect(upstream).toEqual({
      host: "proxy.corp.example",
      port: 8080,
      login: "user:p@ss",
      noProxy: [".internal.example", ".corp.example", ".lan"],
    });
    const config = squidConfig({ allow: ["registry.npmjs.org"], proxyPort: 3128 }, upstream);
    expect(config).toContain(
      "cache_peer proxy.corp.example parent 8080 0 no-query no-digest default login=user:p@ss",
    );
    expect(config).toContain("never_direct allow all");
    expect(upstreamProxyFromEnv({})).toBeUndefined();
    expect(upstreamProxyFromEnv({ https_proxy: "socks5://x:1080" })).toBeUndefined();
    expect(upstreamProxyFromEnv({ http_proxy: "proxy:3128" })?.port).toBe(3128);
  });

  it("reads a decision from each access-log line, nothing from other lines", () => {
    expect(parseEgressLine("cordon-egress CONNECT registry.npmjs.org 443 200 TCP_TUNNEL")).toEqual({
      host: "registry.npmjs.org",
      port: 443,
      allowed: true,
      method: "CONNECT",
      status: 200,
    });
    expect(parseEgressLine("cordon-egress GET Example.com 80 403 TCP_DENIED")).toMatchObject({
      host: "example.com",
      port: 80,
      allowed: false,
    });
    expect(
      parseEgressLine("2026/11/23 23:29:13| Accepting HTTP Socket connections"),
    ).toBeUndefined();
    expect(parseEgressLine("cordon-egress CONNECT - - 400 NONE_NONE")).toBeUndefined();
  });
});
