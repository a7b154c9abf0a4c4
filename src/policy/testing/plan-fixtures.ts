/** Fixtures for tests of the policy layer (and of code that consumes plans): a fake host. */
import { PolicyDeniedError } from "../../common/index.js";
import { parseConfig } from "../../config/index.js";
import type { HostEntryKind } from "../mount-plan.js";
import { planRun, type PlanRunInput, type RunPlan } from "../plan-run.js";

export const home = "/home/u";
export const stateDir = "/home/u/.cordon";
export const project = "/home/u/proj";

/**
 * A fake host for symlinks: `links` maps a path to what it points at; any path below a link is
 * resolved through it (longest link first), like realpath would.
 */
export function fakeRealpath(links: Record<string, string> = {}): (p: string) => string {
  const entries = Object.entries(links).sort(([a], [b]) => b.length - a.length);
  return (p) => {
    for (const [from, to] of entries) {
      if (p === from || p.startsWith(`${from}/`)) return `${to}${p.slice(from.length)}`;
    }
    return p;
  };
}

/** A fake host's lstat: what `entries` says is at a path, else nothing. */
export function fakeEntryKind(
  entries: Record<string, HostEntryKind> = {},
): (p: string) => HostEntryKind | undefined {
  return (p) => entries[p];
}

export interface PlanOptions extends Partial<Omit<PlanRunInput, "config">> {
  links?: Record<string, string>;
  /** What exists on the fake host (lstat); by default nothing, so the project has no `.git`. */
  entries?: Record<string, HostEntryKind>;
}

/** planRun on a config object, on a fake host with home /home/u and the project /home/u/proj. */
export function plan(config: unknown = {}, options: PlanOptions = {}): RunPlan {
  const { links, entries, ...rest } = options;
  return planRun({
    config: parseConfig(config, { cwd: project, homeDir: home }),
    stateDir,
    homeDir: home,
    realpath: fakeRealpath(links),
    entryKind: fakeEntryKind(entries),
    ...rest,
  });
}

/** The refusal planRun throws, for matching its message lines. */
export function refusal(config: unknown, options: PlanOptions = {}): PolicyDeniedError {
  try {
    plan(config, options);
  } catch (error) {
    if (error instanceof PolicyDeniedError) return error;
    throw error;
  }
  throw new Error("expected planRun to refuse the config, but it returned a plan");
}

/** A config with only `agents.defaults.sandbox.docker` set. */
export function withDocker(docker: Record<string, unknown>, sandbox: Record<string, unknown> = {}) {
  return { agents: { defaults: { sandbox: { ...sandbox, docker } } } };
}
