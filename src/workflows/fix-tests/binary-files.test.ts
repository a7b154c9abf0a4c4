import { describe, expect, it } from "vitest";

import { sortBinaryFiles } from "./binary-files.js";

describe("sortBinaryFiles", () => {
  it("binary files the verification run wrote are the test command's; the rest are refused", () => {
    expect(sortBinaryFiles(["test_calc", "rates.bin"], ["test_calc", "calc.o"])).toEqual({
      rebuilt: ["test_calc"],
      refused: ["rates.bin"],
    });
  });
});
