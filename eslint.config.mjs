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

/** Vendor packages imported by subpath (`@scope/pkg/server/index.js`), each with its one owner. */
const vendorPatternOwners = [{ group: "@modelcontextprotocol/sdk/**", owner: "src/mcp/**" }];

/**
 * The only modules that start host programs (DESIGN.md §10, rule 1: the host runs no program over
 * an agent-written tree). Each works on the user's own repository or a seed no agent has reached
 * yet, on kernel mounts, or in mode off (trusted use); reading an agent's copy is the inspector's
 * (src/sandbox/docker/inspector/), which starts containers, not host programs. docs/architecture.md
 * says why each is safe; test/integration/trust-boundary.integration.test.ts traces them.
 */
const hostProgramModules = [
  "src/sandbox/workspace/host-git.ts",
  "src/changes/isolated-git.ts",
  "src/sandbox/workspace/disk-budget.ts",
  "src/sandbox/workspace/anchored-directory.ts",
  "src/sandbox/workspace/disk-watchdog.ts",
  "src/sandbox/host/host-transport.ts",
  "src/sandbox/docker/image-runtime-packages.ts",
  // The user's ssh to a remote engine (`docker system dial-stdio` there); no agent bytes are its input.
  "src/sandbox/docker/client/ssh-dial.ts",
  // A test double (never packaged): cordon's own executor binary run on this host by unit tests.
  "src/sandbox/docker/resident/testing/local-executor.ts",
  // A test helper (never packaged): builds cordon's own executor from its source, asks its greeting.
  "src/sandbox/docker/resident/testing/built-executor.ts",
];

const childProcessRestrictions = ["node:child_process", "child_process"].map((name) => ({
  name,
  message:
    "only the modules in eslint.config.mjs hostProgramModules start host programs (DESIGN.md §10): read an agent's copy with the inspector (src/sandbox/docker/inspector/)",
}));

/** @param {string} [exceptOwner] */
function restrictedVendorPatterns(exceptOwner) {
  return vendorPatternOwners
    .filter(({ owner }) => owner !== exceptOwner)
    .map(({ group, owner }) => ({
      group: [group],
      message: `only ${owner} may import ${group} (DESIGN.md §2)`,
    }));
}

/**
 * @param {string} [exceptOwner]
 * @param {boolean} [mayStartPrograms]
 */
function restrictedVendorImports(exceptOwner, mayStartPrograms = false) {
  return [
    ...vendorOwners
      .filter(({ owner }) => owner !== exceptOwner)
      .map(({ name, owner }) => ({
        name,
        message: `only ${owner} may import ${name} (DESIGN.md §2)`,
      })),
    ...(mayStartPrograms ? [] : childProcessRestrictions),
  ];
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
    rules: {
      "no-restricted-imports": [
        "error",
        { paths: restrictedVendorImports(), patterns: restrictedVendorPatterns() },
      ],
    },
  },
  ...vendorOwners.map(({ owner }) => ({
    files: [owner],
    ignores: ["src/**/*.test.ts"],
    rules: {
      "no-restricted-imports": [
        "error",
        { paths: restrictedVendorImports(owner), patterns: restrictedVendorPatterns() },
      ],
    },
  })),
  ...vendorPatternOwners.map(({ owner }) => ({
    files: [owner],
    ignores: ["src/**/*.test.ts"],
    rules: {
      "no-restricted-imports": [
        "error",
        { paths: restrictedVendorImports(), patterns: restrictedVendorPatterns(owner) },
      ],
    },
  })),
  ...hostProgramModules.map((file) => ({
    files: [file],
    rules: {
      "no-restricted-imports": [
        "error",
        {
          paths: restrictedVendorImports(
            file.startsWith("src/sandbox/docker/") ? "src/sandbox/docker/**" : undefined,
            true,
          ),
          patterns: restrictedVendorPatterns(),
        },
      ],
    },
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
