/**
 * How many tests a test command ran, read from its output (one small parser per runner), and the
 * check that verification did not run fewer than the run before the agent.
 */
export { countTests, countedRunners, unreadRunners, type RunnerCount } from "./count-tests.js";
export { checkTestCount, type TestCountCheck } from "./check-count.js";
