import { describe, expect, it } from "vitest";

import { egressAllows, egressHostProblem, hostCaBundleTarget, planEgress } from "./egress.js";

function plan(overrides: Partial<Parameters<typeof planEgress>[0]> = {}) {
  const result = planEgress({
    config: { allow: [], trustHostCertificates: false },
    key: (field) => `agents.defaults.sandbox.egress.${field}`,
    network: "none",
    networkKey: "agents.defaults.sandbox.docker.network",
    containerName: "cordon-demo-1234",
    entryKind: (p) => (p === "/etc/ssl/certs/ca-certificates.crt" ? "file" : undefined),
    ...overrides,
  });
  return { ...result.value, problems: result.issues, explanation: result.notes };
}

describe("egress allowlist", () => {
  it("accepts host names and *.domain globs, refuses what would widen or confuse the proxy", () => {
    for (const good of ["registry.npmjs.org", "*.pythonhosted.org", "localhost", "A.Example.org"]) {
      expect(egressHostProblem(good)).toBeUndefined();
    }
    for (const bad of [
      "*",
      "*.com",
      "https://registry.npmjs.org",
      "registry.npmjs.org:443",
      "registry.npmjs.org/path",
      "10.0.0.1",
      "a b.org",
      "evil.org acl all",
      "-x.org",
      "*.*.org",
    ]) {
      expect(egressHostProblem(bad), bad).toBeDefined();
    }
  });

  it("a glob matches names below its domain, not the domain itself or look-alikes", () => {
    const allow = ["*.pythonhosted.org", "registry.npmjs.org"];
    expect(egressAllows(allow, "files.pythonhosted.org")).toBe(true);
    expect(egressAllows(allow, "a.b.pythonhosted.org")).toBe(true);
    expect(egressAllows(allow, "pythonhosted.org")).toBe(false);
    expect(egressAllows(allow, "evilpythonhosted.org")).toBe(false);
    expect(egressAllows(allow, "REGISTRY.npmjs.org")).toBe(true);
    expect(egressAllows(allow, "registry.npmjs.org.evil.com")).toBe(false);
  });

  it("the model gateway gets the proxy with an empty list: the proxy refuses every host", () => {
    const result = plan({ gateway: true });
    expect(result.egress).toMatchObject({ allow: [], proxyContainer: "cordon-demo-1234-egress" });
    expect(result.env["HTTPS_PROXY"]).toBe("http://127.0.0.1:3128");
    expect(result.explanation.join("\n")).toMatch(/none but cordon's model gateway/);
    expect(plan({ gateway: true, network: "bridge" }).problems).toEqual([
      expect.objectContaining({ path: "agents.defaults.sandbox.docker.network" }),
    ]);
  });

  it("no allowlist: no proxy, the network stays none", () => {
    const result = plan();
    expect(result.egress).toBeUndefined();
    expect(result.env).toEqual({});
    expect(result.explanation.join("\n")).toMatch(/egress: none/);
  });

  it("config and --allow-host together name the proxy and point the sandbox at it", () => {
    const result = plan({
      config: { allow: ["registry.npmjs.org"], trustHostCertificates: false },
      runAllow: ["*.PythonHosted.org", "registry.npmjs.org"],
    });
    expect(result.problems).toEqual([]);
    expect(result.egress).toEqual({
      allow: ["*.pythonhosted.org", "registry.npmjs.org"],
      proxyContainer: "cordon-demo-1234-egress",
      proxyPort: 3128,
    });
    // The forwarded port on the sandbox's loopback: it has no network of its own.
    expect(result.env["HTTPS_PROXY"]).toBe("http://127.0.0.1:3128");
    expect(result.env["no_proxy"]).toContain("localhost");
    expect(result.explanation.join("\n")).toMatch(
      /to \*\.pythonhosted\.org, registry\.npmjs\.org \(agents\.defaults\.sandbox\.egress\.allow, --allow-host\)/,
    );
  });

  it("a phase's allowlist replaces the config's and the run's", () => {
    const result = plan({
      config: { allow: ["example.org"], trustHostCertificates: false },
      runAllow: ["example.com"],
      phaseAllow: ["registry.npmjs.org"],
    });
    expect(result.egress?.allow).toEqual(["registry.npmjs.org"]);
    expect(
      plan({ config: { allow: ["example.org"], trustHostCertificates: false }, phaseAllow: [] })
        .egress,
    ).toBeUndefined();
  });

  it("refuses bad entries, and an allowlist on a network that is not none", () => {
    const bad = plan({ runAllow: ["*"] });
    expect(bad.problems.map((p) => p.message).join()).toMatch(/every host/);
    const bridge = plan({ runAllow: ["registry.npmjs.org"], network: "bridge" });
    expect(bridge.problems).toEqual([
      expect.objectContaining({ path: "agents.defaults.sandbox.docker.network" }),
    ]);
  });

  it("trustHostCertificates mounts the host bundle read-only and points the usual variables at it", () => {
    const result = plan({ config: { allow: [], trustHostCertificates: true } });
    expect(result.caMount).toEqual({
      source: "/etc/ssl/certs/ca-certificates.crt",
      target: hostCaBundleTarget,
      readOnly: true,
      role: "ca-certificates",
    });
    for (const name of ["SSL_CERT_FILE", "NODE_EXTRA_CA_CERTS", "PIP_CERT", "REQUESTS_CA_BUNDLE"]) {
      expect(result.env[name]).toBe(hostCaBundleTarget);
    }
    const none = plan({
      config: { allow: [], trustHostCertificates: true },
      entryKind: () => undefined,
    });
    expect(none.problems[0]?.message).toMatch(/no CA bundle/);
  });
});
