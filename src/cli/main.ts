#!/usr/bin/env node
import { endOnClosedPipe } from "./closed-pipe.js";
import { runCli } from "./run-cli.js";

endOnClosedPipe(process.stdout);
endOnClosedPipe(process.stderr);
process.exitCode = await runCli(process.argv, process.env);
