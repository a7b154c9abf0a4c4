export * from "./docker/index.js";
