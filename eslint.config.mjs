// @ts-check
import js from "@eslint/js";
import tseslint from "typescript-eslint";

/**
 * Vendor libraries may only be imported by the module that owns them (DESIGN.md §2), so no
 * vendor type leaks across a module's public surface. dockerode is owned by the engine clients
 * alone (`ContainerClient` and its siblings): the rest of the Docker backend speaks cordon's
 * types. It comes after tar-stream, whose owner contains it: for a file both globs match, the
 * later entry's rule is the one that applies.
 */
const vendorOwners = [
  { name: "tar-stream", owner: "src/sandbox/docker/**" },
  { name: "dockerode", owner: "src/sandbox/docker/client/**" },
  { name: "commander", owner: "src/cli/**" },
  { name: "@anthropic-ai/sdk", owner: "src/runner/model/**" },
  { name: "minimatch", owner: "src/workflows/fix-tests/harness-files.ts" },
];

/** @param {string} [exceptOwner] */
function restrictedVendorImports(exceptOwner) {
  return vendorOwners
    .filter(({ owner }) => owner !== exceptOwner)
    .map(({ name, owner }) => ({
      name,
      message: `only ${owner} may import ${name} (DESIGN.md §2)`,
    }));
}

export default tseslint.config(
  // test/fixtures: projects the tests hand to agents, as their authors would write them.
  { ignores: ["dist/**", "dist-bench/**", "node_modules/**", "coverage/**", "test/fixtures/**"] },
  js.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      "@typescript-eslint/consistent-type-imports": "error",
      "@typescript-eslint/no-floating-promises": "error",
      "@typescript-eslint/no-unused-vars": [
        "error",
        { argsIgnorePattern: "^_", varsIgnorePattern: "^_" },
      ],
      "@typescript-eslint/only-throw-error": "error",
      "no-console": "off",
    },
  },
  {
    files: ["src/**/*.ts"],
    ignores: ["src/**/*.test.ts"],
    rules: { "no-restricted-imports": ["error", { paths: restrictedVendorImports() }] },
  },
  ...vendorOwners.map(({ owner }) => ({
    files: [owner],
    ignores: ["src/**/*.test.ts"],
    rules: { "no-restricted-imports": ["error", { paths: restrictedVendorImports(owner) }] },
  })),
  {
    files: ["**/*.mjs"],
    ...tseslint.configs.disableTypeChecked,
    languageOptions: {
      ...tseslint.configs.disableTypeChecked.languageOptions,
      globals: { console: "readonly", process: "readonly" },
    },
  },
);
