import { describe, expect, it } from "vitest";

import { ConfigError } from "../../../common/index.js";
import { defaultEngineEndpoint, type EngineEndpoint } from "../client/engine-endpoint.js";
import { remoteEgressRefusal } from "./remote-egress-refusal.js";

const elsewhere: EngineEndpoint = {
  host: "ssh://builder@build-box",
  source: { kind: "DOCKER_HOST" },
  transport: { kind: "ssh", hostname: "build-box", user: "builder" },
  sharesFilesystem: false,
};
const egress = (allow: string[]) => ({
  egress: { allow, proxyContainer: "cordon-egress-x", proxyPort: 3128 },
});

describe("remoteEgressRefusal", () => {
  it("lets a sandbox without egress run anywhere, and egress run on a local engine", () => {
    expect(remoteEgressRefusal(elsewhere, {})).toBeUndefined();
    expect(remoteEgressRefusal(defaultEngineEndpoint, egress(["registry.npmjs.org"]))).toBe(
      undefined,
    );
  });

  it("refuses an allowlist on an engine elsewhere, naming the hosts, the engine and the fix", () => {
    const refusal = remoteEgressRefusal(elsewhere, egress(["registry.npmjs.org", "*.pypi.org"]));
    expect(refusal).toBeInstanceOf(ConfigError);
    expect(refusal?.message).toMatch(
      /^an egress allowlist \(registry\.npmjs\.org, \*\.pypi\.org\) cannot work with the Docker engine at ssh:\/\/builder@build-box/,
    );
    expect(refusal?.fix).toMatch(/without --allow-host/);
  });

  it("refuses the proxy an agent runtime needs even with an empty list", () => {
    expect(remoteEgressRefusal(elsewhere, egress([]))?.message).toMatch(
      /^the egress proxy an agent runtime that calls the model itself needs cannot work/,
    );
  });
});
