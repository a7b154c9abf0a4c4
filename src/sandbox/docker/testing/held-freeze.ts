import { holdFreezeMarker } from "../freeze-marker.js";

/** A freeze marker held by this process, as another cordon command (a rollback) would hold it. */
export interface HeldFreeze {
  /** Lets the hold end and waits until the marker is gone. */
  release(): Promise<void>;
}

/**
 * Holds `containerName`'s freeze marker until `release()`; resolves once it is held. `onRelease`
 * runs inside the hold after the release, as a rollback resumes its container before letting go.
 */
export async function holdFreezeUntilReleased(
  stateDirectory: string,
  containerName: string,
  onRelease?: () => Promise<unknown>,
): Promise<HeldFreeze> {
  let letGo!: () => void;
  const gate = new Promise<void>((resolve) => (letGo = resolve));
  let held!: () => void;
  const holding = new Promise<void>((resolve) => (held = resolve));
  const done = holdFreezeMarker(stateDirectory, containerName, async () => {
    held();
    await gate;
    await onRelease?.();
  });
  await Promise.race([holding, done]);
  return {
    release: async () => {
      letGo();
      await done;
    },
  };
}
