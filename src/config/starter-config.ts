/**
 * What `cordon config init` writes: a commented cordon.json5 with the settings people change
 * first, each at its built-in default. Only settings that cannot loosen isolation are active,
 * so the file works before it is trusted; the loosening ones are shown commented out with what
 * they open. A test parses it and checks both.
 */
export const starterConfigText = `// cordon.json5: cordon's settings for this project. Every key is optional; the values below
// are the built-in defaults. \`cordon config validate\` checks the file, \`cordon sandbox explain\`
// shows what a run gets, \`cordon help configuration\` describes every key, and
// \`cordon config schema > cordon.schema.json\` gives editors a schema ($schema: "./cordon.schema.json").
//
// Found in the working directory, this file may tighten isolation but not loosen it until you
// run \`cordon config trust\` (the commented-out settings marked "loosens" need that).
{
  // The model, and the ones to fall back to when it is overloaded or unavailable.
  model: { primary: "claude-sonnet-4-6", fallbacks: [] },

  // minimal | coding | full: the tools the agent is offered.
  tools: { profile: "coding" },

  // cordon fix-tests refuses changes to tests, CI files, lockfiles and the test harness
  // (Makefile, package.json scripts, runner configs, ...). More globs to protect:
  fixTests: { protect: [] },

  agents: {
    defaults: {
      sandbox: {
        // off | non-main | all: which sessions run in a container.
        mode: "all",
        // session | agent | shared: which runs share one container.
        scope: "session",
        // none: the agent works on a private copy you review with \`cordon diff\` and take
        // with \`cordon apply\`; ro mounts the project read-only; rw (loosens) writes it directly.
        workspaceAccess: "none",
        // What the agent may write to its private copy.
        disk: "10g",

        // Git-ignored dependencies copied into the private copy (loosens: ignored files are
        // where secrets live). On the command line: --carry node_modules
        // carry: ["node_modules", ".venv"],

        // Hosts the sandbox may reach through cordon's egress proxy (loosens); none by default.
        // On the command line: --allow-host registry.npmjs.org
        // egress: { allow: ["registry.npmjs.org", "*.pythonhosted.org"] },

        docker: {
          // none: no network at all (egress.allow above gives a proxy with an allowlist).
          network: "none",
          memory: "1g",
          cpus: 1,
          // A project image: FROM cordon-sandbox:latest plus what your tests need (loosens).
          // image: "my-project-sandbox:latest",
        },
      },
    },
  },
}
`;
