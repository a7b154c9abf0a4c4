import JSON5 from "json5";
import { describe, expect, it } from "vitest";

import { configDefaults } from "./schema.js";
import { looseningKeys } from "./loosening-keys.js";
import { parseConfig } from "./load-config.js";
import { starterConfigText } from "./starter-config.js";

describe("the starter config (cordon config init)", () => {
  const layer = JSON5.parse<Record<string, unknown>>(starterConfigText);

  it("is a valid config whose values are the built-in defaults", () => {
    const config = parseConfig(layer, { cwd: "/project" });
    expect(config).toEqual(parseConfig({}, { cwd: "/project" }));
    expect(config.model).toEqual(configDefaults.model);
  });

  it("works before it is trusted: nothing in it loosens isolation", () => {
    expect(
      looseningKeys(layer, { directory: "/project", homeDir: "/home/u", realpath: (p) => p }),
    ).toEqual([]);
  });

  it("shows the loosening settings commented out, each with its command-line flag", () => {
    expect(starterConfigText).toMatch(/^ *\/\/ carry: \["node_modules", "\.venv"\],$/m);
    expect(starterConfigText).toMatch(/--carry node_modules/);
    expect(starterConfigText).toMatch(/^ *\/\/ egress: \{ allow: \[/m);
    expect(starterConfigText).toMatch(/--allow-host registry\.npmjs\.org/);
  });
});
