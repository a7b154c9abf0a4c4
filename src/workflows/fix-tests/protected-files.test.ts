import { describe, expect, it } from "vitest";

import { protectedKind } from "./protected-files.js";

describe("protectedKind", () => {
  it.each([
    ["test_pricing.py", "test"],
    ["pkg/pricing_test.go", "test"],
    ["src/sum.test.ts", "test"],
    ["web/app.spec.jsx", "test"],
    ["tests/helpers.py", "test"],
    ["src/__tests__/x.js", "test"],
    ["src/test/java/FooTest.java", "test"],
    ["spec/models/user_spec.rb", "test"],
    ["conftest.py", "test"],
    [".github/workflows/ci.yml", "ci"],
    [".gitlab-ci.yml", "ci"],
    ["Jenkinsfile", "ci"],
    ["package-lock.json", "lockfile"],
    ["backend/poetry.lock", "lockfile"],
    ["go.sum", "lockfile"],
  ])("%s is %s", (file, kind) => {
    expect(protectedKind(file)).toBe(kind);
  });

  it.each([
    "pricing.py",
    "src/latest.ts",
    "src/contest.py",
    "docs/testing.md",
    "attest.go",
    "Cargo.toml",
  ])("%s is ordinary code", (file) => {
    expect(protectedKind(file)).toBeUndefined();
  });
});
