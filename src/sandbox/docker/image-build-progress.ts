import type { ImageBuildEvent } from "./sandbox-image.js";

const instructionWidth = 72;

function clip(text: string, width: number): string {
  return text.length > width ? `${text.slice(0, width - 1)}…` : text;
}

function seconds(ms: number): string {
  return `${(ms / 1000).toFixed(1)}s`;
}

/**
 * One line for a person per build event, or undefined: the engine's own output goes only to the
 * build log, so a build shows about ten lines (one per Dockerfile step), never thousands of apt
 * lines or the engine's colour codes.
 */
export function describeImageBuildEvent(event: ImageBuildEvent): string | undefined {
  switch (event.type) {
    case "base":
      return `base image: ${event.image} (${event.source})`;
    case "skipped":
      return `${event.tag} is current; nothing to build (--force rebuilds)`;
    case "log":
      return `building ${event.tag} (full log: ${event.logFile})`;
    case "fetched":
      return `fetched ${event.spec} from the npm registry (integrity checked)`;
    case "step": {
      const instruction = event.instruction.replace(/\s+/g, " ");
      const shown = clip(instruction, instructionWidth);
      const at = event.elapsedMs === undefined ? "" : ` ${seconds(event.elapsedMs)}`;
      return `[${event.step}/${event.total}${at}] ${shown}`;
    }
    case "step-output":
      return `    ${seconds(event.elapsedMs)} ${clip(event.line.trim(), instructionWidth)}`;
    case "built":
      return `built ${event.tag} in ${seconds(event.durationMs)}`;
  }
}
