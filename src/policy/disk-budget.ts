import { formatByteSize, parseByteSize } from "../config/index.js";
import { planned, type Planned } from "./planned.js";

/** Smaller ext4 images are mostly journal and metadata: too little room to work in. */
export const minimumDiskBytes = 16 * 1024 ** 2;

/**
 * `sandbox.disk` in bytes: undefined for no bound (0 or "unlimited"); a size below the minimum is
 * an issue naming the key.
 */
export function resolveDiskBudget(
  value: string | number,
  key: string,
): Planned<number | undefined> {
  if (value === 0 || value === "unlimited") return planned(undefined);
  const bytes = parseByteSize(value);
  if (bytes === undefined || bytes < minimumDiskBytes) {
    return planned(undefined, {
      issues: [
        {
          path: key,
          message: `"${value}" is not a disk size of at least ${formatByteSize(minimumDiskBytes)} (or 0 / "unlimited" for no bound)`,
        },
      ],
    });
  }
  return planned(bytes);
}
