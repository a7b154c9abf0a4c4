/**
 * Seeds and disk images being built carry their builder's pid, so leftovers of a dead process can
 * be removed. The check lives with the rest of process identity in common.
 */
export { isAlive } from "../../common/index.js";
