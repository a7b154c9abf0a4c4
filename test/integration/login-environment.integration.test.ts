import { afterAll, beforeAll, describe, expect, it } from "vitest";

import { sandboxHomeDirectory } from "../../src/config/index.js";
import { hardenedDockerSettings } from "../support/sandbox-spec.js";
import { startDockerToolSandbox, type DockerToolSandbox } from "../support/tool-runner.js";

/** /etc/profile's PATH for a non-root user: what a login shell has instead of the image's ENV. */
const loginPath = "/usr/local/bin:/usr/bin:/bin:/usr/local/games:/usr/games";

/**
 * Commands run in the sandbox user's login environment (docs/architecture.md, "The login
 * environment"): the resident executor reads it once with a login shell and again after a
 * profile file changed; plain exec runs a login shell per command. What an agent sees when it
 * edits its profile is the same either way: the change holds from its next command.
 */
describe.each(["resident", "exec"] as const)("login environment (executor %s)", (executor) => {
  let box: DockerToolSandbox;

  beforeAll(async () => {
    box = await startDockerToolSandbox({
      name: `login-env-${executor}`,
      docker: {
        executor,
        // HOME writable, as the policy makes it: the agent's profile lives there.
        tmpfs: {
          ...hardenedDockerSettings().tmpfs,
          [sandboxHomeDirectory]: "rw,nosuid,nodev,exec,size=16m,uid=1000,gid=1000",
        },
      },
    });
  });

  afterAll(async () => {
    await box?.dispose();
  });

  const run = async (command: string, options: { stdin?: string } = {}): Promise<string> => {
    const result = await box.sandbox.exec(command, options);
    expect(result, `${command} in ${box.sandbox.id}`).toMatchObject({ exitCode: 0 });
    return result.stdout;
  };

  it("has the login shell's PATH and the image's environment, with no login shell of its own", async () => {
    expect(await run('echo "$PATH"')).toBe(`${loginPath}\n`);
    // The image's ENV and the container's env are there; the shell's own bookkeeping is its own.
    expect(await run('echo "$LANG|$HOME|$SHLVL|$PWD"')).toBe(
      `C.UTF-8|${sandboxHomeDirectory}|1|/workspace\n`,
    );
    // Not a login shell: `shopt -q login_shell` fails. (Plain exec still starts one per command.)
    const login = (await box.sandbox.exec("shopt -q login_shell")).exitCode;
    expect(login).toBe(executor === "resident" ? 1 : 0);
  });

  it("takes a profile the agent writes from its next command, and an edit of it too", async () => {
    await run(
      [
        "mkdir -p ~/tools && printf '#!/bin/sh\\necho tool-ran\\n' > ~/tools/mytool && chmod +x ~/tools/mytool",
        `printf '%s\\n' 'export GREETING=hello' 'export PATH="$HOME/tools:$PATH"' > ~/.profile`,
      ].join(" && "),
    );
    expect(await run('echo "$GREETING"; mytool')).toBe("hello\ntool-ran\n");

    // Edited in place, same size, within the same second: the next command sees the new value.
    await run("sed -i 's/hello/howdy/' ~/.profile");
    expect(await run('echo "$GREETING"')).toBe("howdy\n");

    // A per-call environment still wins over the profile, for that call only.
    expect((await box.sandbox.exec('echo "$GREETING"', { env: { GREETING: "call" } })).stdout).toBe(
      "call\n",
    );
    expect(await run('echo "$GREETING"')).toBe("howdy\n");

    await run("rm ~/.profile");
    expect(await run('echo "[$GREETING]"; command -v mytool || echo none')).toBe("[]\nnone\n");
  });

  it("puts ~/.local/bin on PATH once it exists, as Debian's ~/.profile does", async () => {
    await run(
      `printf '%s\\n' 'if [ -d "$HOME/.local/bin" ]; then PATH="$HOME/.local/bin:$PATH"; fi' > ~/.profile`,
    );
    expect(await run('echo "$PATH"')).toBe(`${loginPath}\n`);
    // What `pip install --user` does: the directory appears, the profile is untouched.
    await run(
      "mkdir -p ~/.local/bin && printf '#!/bin/sh\\necho local\\n' > ~/.local/bin/lt && chmod +x ~/.local/bin/lt",
    );
    expect(await run("lt")).toBe("local\n");
    await run("rm -rf ~/.local ~/.profile");
  });

  it("gives commands that arrive while the profile is read the new environment and their stdin", async () => {
    await run(`echo 'export WAVE=second' > ~/.profile`);
    const results = await Promise.all(
      Array.from({ length: 6 }, (_, i) => run(`echo "$WAVE"; cat`, { stdin: `in${i}` })),
    );
    expect(results).toEqual(Array.from({ length: 6 }, (_, i) => `second\nin${i}`));
    await run("rm ~/.profile");
  });

  it("runs commands as before when the profile fails: a login shell per command sees it", async () => {
    // The login shell exits before it runs anything: the same for every command, either way.
    await run(`echo 'exit 7' > ~/.profile`);
    expect((await box.sandbox.exec("echo unreachable")).exitCode).toBe(7);
    // No command gets past it; the file tools do not run the shell.
    await box.sandbox.files.remove(`${sandboxHomeDirectory}/.profile`);
    expect(await run("echo back")).toBe("back\n");
  });
});
