import { describe, expect, it } from "vitest";

import { painter, plain } from "../render/colors.js";
import { formatDoctorReport, type DoctorReport } from "./doctor.js";

const report: DoctorReport = {
  ok: false,
  checks: [
    { name: "node", status: "ok", detail: "Node.js 22.1.0" },
    { name: "disk", status: "warn", detail: "not enforced", fix: "run as root" },
    { name: "docker", status: "fail", detail: "no engine" },
  ],
};

describe("the doctor's report", () => {
  it("marks each verdict in its colour on a terminal and plainly elsewhere", () => {
    const coloured = formatDoctorReport(report, painter(true));
    expect(coloured).toContain("\u001b[32mok  \u001b[39m  node");
    expect(coloured).toContain("\u001b[33m\u001b[1mWARN\u001b[22m\u001b[39m  disk");
    expect(coloured).toContain("\u001b[31m\u001b[1mFAIL\u001b[22m\u001b[39m  docker");
    expect(formatDoctorReport(report)).toBe(
      "ok    node    Node.js 22.1.0\n" +
        "WARN  disk    not enforced\n              fix: run as root\n" +
        "FAIL  docker  no engine\n\nsome checks failed\n",
    );
  });

  it("keeps findings in one column whatever the longest name, wrapped under it on a terminal", () => {
    const long: DoctorReport = {
      ok: true,
      checks: [
        { name: "node", status: "ok", detail: "Node.js 22.1.0" },
        {
          name: "executor",
          status: "warn",
          detail: "the resident executor is not built, so every call opens a Docker exec",
          fix: "npm run build",
        },
      ],
    };
    expect(formatDoctorReport(long, plain, 50)).toBe(
      "ok    node      Node.js 22.1.0\n" +
        "WARN  executor  the resident executor is not\n" +
        "                built, so every call opens a\n" +
        "                Docker exec\n" +
        "                fix: npm run build\n" +
        "\nall checks passed, with warnings\n",
    );
    const lines = formatDoctorReport(long, plain, 50).split("\n");
    expect(Math.max(...lines.map((line) => line.length))).toBeLessThanOrEqual(50);
    // A pipe: one line a finding, as written.
    expect(formatDoctorReport(long)).toContain("not built, so every call");
  });
});
