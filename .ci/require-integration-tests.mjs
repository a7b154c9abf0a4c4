// Fails CI when the Docker integration tests did not run: a green run that skipped them proves
// nothing about isolation. Reads vitest's JSON report.
import { readFileSync } from "node:fs";

const [reportPath] = process.argv.slice(2);
if (!reportPath) {
  console.error("usage: require-integration-tests.mjs <vitest-json-report>");
  process.exit(2);
}
const report = JSON.parse(readFileSync(reportPath, "utf8"));
const counts = { passed: 0, failed: 0, skipped: 0 };
const all = { passed: 0, failed: 0, skipped: 0 };
for (const file of report.testResults ?? []) {
  const integration = /\.integration\.test\.ts$/.test(file.name);
  for (const test of file.assertionResults ?? []) {
    const status =
      test.status === "passed" ? "passed" : test.status === "failed" ? "failed" : "skipped";
    all[status] += 1;
    if (integration) counts[status] += 1;
  }
}
console.log(
  `integration tests: ${counts.passed} passed, ${counts.failed} failed, ${counts.skipped} skipped`,
);
if (counts.passed === 0 || counts.skipped > 0) {
  console.error(
    "CI requires the Docker integration tests to run, none skipped: start a Docker engine (scripts/setup.sh does) and rerun.",
  );
  process.exit(1);
}
console.log(`tests: ${all.passed} passed, ${all.failed} failed, ${all.skipped} skipped`);
process.exit(all.failed > 0 ? 1 : 0);
