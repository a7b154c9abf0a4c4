import { availableParallelism } from "node:os";

import { configDefaults, defineConfig } from "vitest/config";

/**
 * Integration files that do something to the whole engine or machine, so they run alone, after
 * everything else (a project with one worker goes last in vitest's order): another file beside
 * them would see it, or break it.
 */
const runAlone = [
  // Runs a second Docker engine (dockerd in a privileged container of this one) and copies the
  // sandbox image into it with `docker save`: by far the heaviest file on the engine's disk and
  // CPU, which a file beside it would wait on.
  "test/integration/second-engine.integration.test.ts",
  // Builds the built-in image, which moves cordon-sandbox:latest for the length of the build: a
  // sandbox another file made then would get the test's one-line image.
  "test/integration/sandbox-manager.integration.test.ts",
];

const integration = {
  include: ["src/**/*.integration.test.ts", "test/**/*.integration.test.ts"],
  testTimeout: 120_000,
  hookTimeout: 180_000,
  // Containers are cheap but the machine has two cores.
  maxConcurrency: 4,
};

export default defineConfig({
  test: {
    // Files at once. Vitest's default leaves one core free (availableParallelism() - 1), which on a
    // two-core machine ran every file one after another. Integration files mostly wait on Docker:
    // two at a time, four such files took 75 s instead of 134 s; CPU-bound ones (npm pack, a
    // project's test suite) gain little (130 s instead of 147 s). Unit and parallel integration
    // files share one group, so they must share this number.
    maxWorkers: Math.max(2, availableParallelism() - 1),
    projects: [
      {
        test: {
          name: "unit",
          include: ["src/**/*.test.ts", "test/**/*.test.ts"],
          exclude: ["**/*.integration.test.ts", "node_modules/**", "dist/**"],
        },
      },
      {
        test: {
          name: "integration",
          ...integration,
          exclude: [...configDefaults.exclude, ...runAlone],
        },
      },
      {
        test: {
          name: "integration-alone",
          ...integration,
          include: runAlone,
          fileParallelism: false,
        },
      },
    ],
  },
});
