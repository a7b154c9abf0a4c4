/**
 * The images a Dockerfile builds FROM, as far as the host can tell without running anything: each
 * `FROM [--platform=…] IMAGE [AS NAME]` with `${ARG}` / `$ARG` replaced by the build arguments or
 * the defaults of `ARG`s declared before the first FROM (the only ones FROM may use). Stage names
 * and `scratch` are left out. Their ids go into the project image's tag, so a rebuilt base (a new
 * `cordon image build`) rebuilds the project image too.
 */
export function dockerfileBaseImages(
  dockerfile: string,
  buildArgs: Readonly<Record<string, string>>,
): string[] {
  // Instructions, with line continuations joined and comments dropped.
  const instructions = dockerfile
    .replace(/\\\r?\n/g, " ")
    .split(/\r?\n/)
    .map((line) => line.trim())
    .filter((line) => line !== "" && !line.startsWith("#"));
  const globalArgs: Record<string, string> = {};
  const stages = new Set<string>();
  const bases: string[] = [];
  let seenFrom = false;
  for (const line of instructions) {
    const [keyword = "", ...rest] = line.split(/\s+/);
    const upper = keyword.toUpperCase();
    if (upper === "ARG" && !seenFrom) {
      for (const declaration of rest) {
        const equals = declaration.indexOf("=");
        const name = equals === -1 ? declaration : declaration.slice(0, equals);
        const value = equals === -1 ? "" : unquote(declaration.slice(equals + 1));
        if (equals !== -1 || !(name in globalArgs)) globalArgs[name] = value;
      }
    } else if (upper === "FROM") {
      seenFrom = true;
      const words = rest.filter((word) => !word.startsWith("--"));
      const image = substitute(words[0] ?? "", { ...globalArgs, ...buildArgs });
      const alias = words[1]?.toUpperCase() === "AS" ? words[2] : undefined;
      if (image !== "" && image.toLowerCase() !== "scratch" && !stages.has(image.toLowerCase())) {
        if (!bases.includes(image)) bases.push(image);
      }
      if (alias) stages.add(alias.toLowerCase());
    }
  }
  return bases;
}

function substitute(text: string, values: Readonly<Record<string, string>>): string {
  return text.replace(
    /\$\{([A-Za-z_][A-Za-z0-9_]*)(?::?-([^}]*))?\}|\$([A-Za-z_][A-Za-z0-9_]*)/g,
    (
      _match,
      braced: string | undefined,
      fallback: string | undefined,
      bare: string | undefined,
    ) => {
      const name = braced ?? bare ?? "";
      const value = values[name];
      return value !== undefined && value !== "" ? value : (fallback ?? "");
    },
  );
}

function unquote(value: string): string {
  return /^(["']).*\1$/.test(value) ? value.slice(1, -1) : value;
}
