import { describe, expect, it } from "vitest";

import { ConfigError } from "../../common/index.js";
import { parsePortMapping } from "./port-forward.js";

describe("parsePortMapping", () => {
  it("reads [LOCAL:]REMOTE as kubectl port-forward does", () => {
    expect(parsePortMapping("3000")).toEqual({ localPort: 3000, remotePort: 3000 });
    expect(parsePortMapping("8080:3000")).toEqual({ localPort: 8080, remotePort: 3000 });
    expect(parsePortMapping(":3000")).toEqual({ localPort: 0, remotePort: 3000 });
    expect(parsePortMapping("0:3000")).toEqual({ localPort: 0, remotePort: 3000 });
  });

  it("refuses what is not a port, naming the form", () => {
    for (const text of ["", "0", "70000", "3000:", "a:3000", "1:2:3", "-1", "3000:0", "80:70000"]) {
      expect(() => parsePortMapping(text)).toThrow(ConfigError);
    }
    expect(() => parsePortMapping("web")).toThrow(/"web" is not a port mapping/);
  });
});
