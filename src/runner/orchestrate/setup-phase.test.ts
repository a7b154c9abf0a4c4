import { describe, expect, it, vi } from "vitest";

import type { MountSpec } from "../../sandbox/index.js";
import {
  inspectedTls,
  setupFailureFix,
  setupFailureMessage,
  type SetupRun,
  type SetupSandboxPlan,
} from "./setup-phase.js";

const failed: SetupRun = {
  command: "npm ci",
  exitCode: 1,
  timedOut: false,
  outputTail: "npm error Exit handler never called!\n",
  durationMs: 70_000,
  refused: [],
};

const caMount: MountSpec = {
  source: "/etc/ssl/certs/ca-certificates.crt",
  target: "/usr/local/share/cordon/host-ca-certificates.crt",
  readOnly: true,
  role: "ca-certificates",
};

function planWith(allow: string[], mounts: MountSpec[] = []): SetupSandboxPlan {
  return { sandbox: { spec: { egress: { allow, proxyContainer: "p", proxyPort: 3128 }, mounts } } };
}

const inspection = {
  host: "registry.npmjs.org",
  issuer: "Corp Proxy CA",
  bundle: "/etc/ssl/certs/ca-certificates.crt",
};

describe("a failed setup's message", () => {
  it("names the refused hosts first", () => {
    const run = { ...failed, refused: ["github.com"], tlsInspection: inspection };
    expect(setupFailureFix(run)).toBe(
      "The egress proxy refused github.com: allow what it needs with --setup-allow-host github.com",
    );
  });

  it("names a re-signing network and the setting that trusts the host's bundle", () => {
    const message = setupFailureMessage({ ...failed, tlsInspection: inspection });
    expect(message).toContain(
      're-signs HTTPS to registry.npmjs.org with its own CA ("Corp Proxy CA")',
    );
    expect(message).toContain(
      "{ agents: { defaults: { sandbox: { egress: { trustHostCertificates: true } } } } }",
    );
    expect(message).toMatch(/\nnpm error Exit handler never called!$/);
  });

  it("with no network, names the registries of the package managers the command runs", () => {
    expect(setupFailureFix({ ...failed, offline: true })).toBe(
      "It ran with no network: if it failed fetching, `npm` fetches from registry.npmjs.org, so allow it with --setup-allow-host registry.npmjs.org",
    );
    expect(
      setupFailureFix({
        ...failed,
        command: "CI=1 npm ci && python3 -m pip install -r requirements.txt",
        offline: true,
      }),
    ).toBe(
      "It ran with no network: if it failed fetching, `npm` and `pip` fetch from registry.npmjs.org, pypi.org, files.pythonhosted.org, so allow them with --setup-allow-host registry.npmjs.org --setup-allow-host pypi.org --setup-allow-host files.pythonhosted.org",
    );
    // A command that is no package manager's, or a setup that had a network: the general fix.
    expect(setupFailureFix({ ...failed, command: "make deps", offline: true })).toMatch(
      /^Fix the command/,
    );
  });

  it("says the fix once when the error has a fix line of its own", () => {
    const message = setupFailureMessage(failed, { withFix: false });
    expect(message).toMatch(/^The setup command `npm ci` failed \(exit 1\)\.\n/);
    expect(message).not.toContain("--setup-allow-host");
  });

  it("keeps a long output's first lines, where npm names the error, and its last", () => {
    const usage = Array.from({ length: 30 }, (_, n) => `npm error usage line ${n}`);
    const message = setupFailureMessage({
      ...failed,
      outputTail: [
        "npm error code EUSAGE",
        "npm error can only install with a lockfile",
        ...usage,
      ].join("\n"),
    });
    expect(message).toContain(
      "npm error code EUSAGE\nnpm error can only install with a lockfile\n",
    );
    expect(message).toContain("…(12 lines)…\n");
    expect(message).toMatch(/npm error usage line 29$/);
  });

  it("otherwise points at the command and the allowlist", () => {
    expect(setupFailureMessage(failed)).toMatch(
      /^The setup command `npm ci` failed \(exit 1\)\. Fix the command, or allow the hosts it needs with --setup-allow-host\.\n/,
    );
  });
});

describe("inspectedTls", () => {
  it("asks about named allowed hosts, not wildcards, and returns the first finding", async () => {
    const detect = vi.fn((host: string) =>
      Promise.resolve(host === "registry.npmjs.org" ? inspection : undefined),
    );
    await expect(
      inspectedTls(planWith(["*.pythonhosted.org", "pypi.org", "registry.npmjs.org"]), detect),
    ).resolves.toEqual(inspection);
    expect(detect.mock.calls.map(([host]) => host)).toEqual(["pypi.org", "registry.npmjs.org"]);
  });

  it("asks nothing when the sandbox already trusts the host's bundle, or has no egress", async () => {
    const detect = vi.fn(() => Promise.resolve(inspection));
    await expect(
      inspectedTls(planWith(["registry.npmjs.org"], [caMount]), detect),
    ).resolves.toBeUndefined();
    await expect(
      inspectedTls({ sandbox: { spec: { mounts: [] } } }, detect),
    ).resolves.toBeUndefined();
    await expect(inspectedTls(undefined, detect)).resolves.toBeUndefined();
    expect(detect).not.toHaveBeenCalled();
  });
});
