import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
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
          include: ["src/**/*.integration.test.ts", "test/**/*.integration.test.ts"],
          testTimeout: 120_000,
          hookTimeout: 180_000,
          // Containers are cheap but the machine has two cores.
          maxConcurrency: 4,
        },
      },
    ],
  },
});
