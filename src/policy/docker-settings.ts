import type { ConfigIssue, DockerConfig } from "../config/index.js";
import type { DockerSettings, UlimitSpec, WorkspaceAccess } from "../sandbox/index.js";
import { parseByteSize, sandboxHomeDirectory } from "../config/index.js";
// The module, not the sandbox index: policy stays free of Docker's client.
import { parseContainerUser } from "../sandbox/workspace/owner.js";
import { isWithin, normalizeAbsolute } from "./path-guard.js";
import { planned, type Planned } from "./planned.js";
import { sandboxEnvironment } from "./sandbox-env.js";

/** Where the agent workspace appears when it is mounted read-only. */
export const agentMountPoint = "/agent";
/** Docker refuses less memory than this. */
const minimumMemoryBytes = 6 * 1024 * 1024;
const fallbackUser = "1000:1000";
/** The name tools read from the environment when the uid has no passwd entry in the image. */
const sandboxUserName = "sandbox";

export interface DockerSettingsInput {
  docker: DockerConfig;
  /** Config key of a docker field, for messages. */
  key: (field: keyof DockerConfig) => string;
  workspaceAccess: WorkspaceAccess;
  /** Owner of the agent workspace, when known (for `user: "auto"`). */
  workspaceOwner?: { uid: number; gid: number } | undefined;
  /** The uid:gid cordon itself runs as (for `user: "auto"` with a private copy); undefined off POSIX. */
  invokingUser?: { uid: number; gid: number } | undefined;
}

function isRootUser(user: string): boolean {
  const name = user.split(":")[0] ?? "";
  return name === "0" || name.toLowerCase() === "root";
}

/**
 * tmpfs options that say whether programs may run from the mount. Docker adds `noexec` to a tmpfs
 * whose options say neither, so options without either get it written out: the plan (and
 * `explain`) then shows the mount the engine makes, not a looser one.
 */
export function withExecStated(options: string): string {
  const flags = options.split(",").map((flag) => flag.trim().toLowerCase());
  if (flags.includes("exec") || flags.includes("noexec")) return options;
  return options === "" ? "noexec" : `${options},noexec`;
}

/**
 * `sandbox.docker` resolved into what the container is created from: sizes in bytes, nulls
 * dropped, the user decided, and every setting that would weaken isolation either refused or —
 * when its `dangerouslyAllow…` flag is set — kept with a warning. `env` is the declared
 * environment; the sandbox plan adds the egress and offline variables to it, and the image
 * (sandbox-image.ts).
 */
export function resolveDockerSettings(
  input: DockerSettingsInput,
): Planned<Omit<DockerSettings, "image">> {
  const { docker, key } = input;
  const issues: ConfigIssue[] = [];
  const warnings: string[] = [];
  const refuse = (field: keyof DockerConfig, message: string) =>
    issues.push({ path: key(field), message });

  const workdir = normalizeAbsolute(docker.workdir);
  if (!docker.workdir.startsWith("/"))
    refuse("workdir", "must be an absolute path in the container");
  else if (workdir === "/") refuse("workdir", 'must not be "/" (the workspace is mounted there)');
  else if (isWithin(workdir, agentMountPoint) || isWithin(agentMountPoint, workdir)) {
    refuse(
      "workdir",
      `must not overlap ${agentMountPoint}, where a read-only workspace is mounted`,
    );
  } else if (["/proc", "/sys", "/dev"].some((p) => isWithin(workdir, p))) {
    refuse("workdir", "must not be under /proc, /sys or /dev");
  }

  const tmpfs: Record<string, string> = {};
  for (const [target, options] of Object.entries(docker.tmpfs)) {
    if (options === null) continue;
    const normal = normalizeAbsolute(target);
    if (!target.startsWith("/")) {
      refuse("tmpfs", `"${target}" must be an absolute path in the container`);
    } else if (isWithin(workdir, normal) || isWithin(normal, workdir)) {
      refuse("tmpfs", `"${target}" overlaps the workdir ${workdir} and would hide the workspace`);
    } else if (isWithin(agentMountPoint, normal) || isWithin(normal, agentMountPoint)) {
      refuse("tmpfs", `"${target}" overlaps ${agentMountPoint}`);
    } else {
      tmpfs[normal] = withExecStated(options);
      if (!/(^|,)size=/.test(options)) {
        warnings.push(`tmpfs ${normal} has no size= limit (${key("tmpfs")}): it can fill memory`);
      }
    }
  }

  const network = docker.network;
  const lowerNetwork = network.toLowerCase();
  if (lowerNetwork === "host") {
    if (docker.dangerouslyAllowHostNetwork) {
      warnings.push(
        `network "host" (${key("network")}): the sandbox shares the host's network stack, including services on localhost`,
      );
    } else {
      refuse(
        "network",
        '"host" shares the host\'s network with the sandbox; use "none" or "bridge" (or set sandbox.docker.dangerouslyAllowHostNetwork: true)',
      );
    }
  } else if (lowerNetwork.startsWith("container:")) {
    if (docker.dangerouslyAllowContainerNamespaceJoin) {
      warnings.push(
        `network "${network}" (${key("network")}): the sandbox joins another container's network namespace`,
      );
    } else {
      refuse(
        "network",
        `"${network}" joins another container's namespace; use "none" or "bridge" (or set sandbox.docker.dangerouslyAllowContainerNamespaceJoin: true)`,
      );
    }
  } else if (!/^[A-Za-z0-9][A-Za-z0-9_.-]*$/.test(network)) {
    refuse("network", `"${network}" is not a valid network name`);
  } else if (lowerNetwork !== "none") {
    warnings.push(`network "${network}" (${key("network")}): the sandbox can reach the network`);
  }

  const resolvedUser = resolveUser(input);
  const user = resolvedUser.value;
  issues.push(...resolvedUser.issues);
  warnings.push(...resolvedUser.warnings);

  const capDrop = docker.capDrop.map((cap) => cap.toUpperCase());
  if (!capDrop.includes("ALL")) {
    warnings.push(
      `capDrop does not include ALL (${key("capDrop")}): the sandbox keeps Docker's default capabilities`,
    );
  }
  if (!docker.readOnlyRoot) {
    warnings.push(
      `readOnlyRoot is false (${key("readOnlyRoot")}): the container's root filesystem is writable`,
    );
  }

  const memoryBytes = parseByteSize(docker.memory);
  if (memoryBytes === undefined || memoryBytes < minimumMemoryBytes) {
    refuse("memory", `"${docker.memory}" is not a memory size of at least 6m`);
  }
  const memorySwapBytes =
    docker.memorySwap === undefined ? memoryBytes : parseByteSize(docker.memorySwap);
  if (memorySwapBytes === undefined) {
    refuse("memorySwap", `"${docker.memorySwap}" is not a size`);
  } else if (memoryBytes !== undefined && memorySwapBytes < memoryBytes) {
    refuse(
      "memorySwap",
      `memory + swap (${docker.memorySwap}) is less than memory (${docker.memory}); set it equal to memory for no swap`,
    );
  }

  const ulimits: UlimitSpec[] = [];
  for (const [name, value] of Object.entries(docker.ulimits).sort(([a], [b]) =>
    a.localeCompare(b),
  )) {
    if (value === undefined) continue;
    const spec =
      typeof value === "number" ? { name, soft: value, hard: value } : { name, ...value };
    if (spec.soft > spec.hard) {
      refuse("ulimits", `${name}: soft limit ${spec.soft} is above hard limit ${spec.hard}`);
    }
    ulimits.push(spec);
  }

  const seccompProfile = docker.seccompProfile;
  if (seccompProfile !== undefined) {
    if (seccompProfile.toLowerCase() === "unconfined") {
      if (docker.dangerouslyAllowUnconfined) {
        warnings.push(
          `seccomp is unconfined (${key("seccompProfile")}): every system call is allowed`,
        );
      } else {
        refuse(
          "seccompProfile",
          '"unconfined" turns off system call filtering; remove it (or set sandbox.docker.dangerouslyAllowUnconfined: true)',
        );
      }
    } else if (seccompProfile !== "default" && !seccompProfile.startsWith("/")) {
      refuse("seccompProfile", 'must be "default" or an absolute path to a profile');
    }
  }
  const apparmorProfile = docker.apparmorProfile;
  if (apparmorProfile !== undefined) {
    if (apparmorProfile.toLowerCase() === "unconfined") {
      if (docker.dangerouslyAllowUnconfined) {
        warnings.push(`AppArmor is unconfined (${key("apparmorProfile")})`);
      } else {
        refuse(
          "apparmorProfile",
          '"unconfined" turns off AppArmor; remove it (or set sandbox.docker.dangerouslyAllowUnconfined: true)',
        );
      }
    } else if (!/^[A-Za-z0-9_.-]+$/.test(apparmorProfile)) {
      refuse("apparmorProfile", `"${apparmorProfile}" is not a profile name`);
    }
  }

  for (const entry of docker.extraHosts) {
    const colon = entry.indexOf(":");
    const host = entry.slice(0, colon);
    const address = entry.slice(colon + 1);
    if (
      colon <= 0 ||
      !/^[A-Za-z0-9.-]+$/.test(host) ||
      !(address === "host-gateway" || /^[0-9A-Fa-f.:]+$/.test(address))
    ) {
      refuse("extraHosts", `"${entry}" is not "hostname:ip"`);
    }
  }

  const declared = sandboxEnvironment({
    env: docker.env,
    allowedNames: docker.dangerouslyAllowEnvNames,
    configKey: key("env"),
  });
  issues.push(...declared.issues);
  warnings.push(...declared.warnings);
  const env = {
    // A home and a name for any uid, passwd entry or not (python's getpass, npm, git read these);
    // the config's own env comes after and may change them.
    HOME: sandboxHomeDirectory,
    USER: sandboxUserName,
    LOGNAME: sandboxUserName,
    ...declared.value,
  };
  const homeTmpfs = tmpfs[sandboxHomeDirectory];
  const owner = parseContainerUser(user);
  if (homeTmpfs !== undefined && !/(^|,)(uid|gid|mode)=/.test(homeTmpfs)) {
    // A tmpfs is root's unless told otherwise, and the sandbox has no capability to chown it.
    // A user named in the image ("node") has a uid only the image knows, and the policy reads
    // no image: its HOME is writable for any user instead, sticky like /tmp (the container runs
    // that one user; sticky keeps even a second one from removing its files). The engine's
    // runtime (runc) gives a tmpfs the mode of a directory the image already has there, so this
    // holds only in images without their own /home/sandbox, which the warning says.
    if (owner) tmpfs[sandboxHomeDirectory] = `${homeTmpfs},uid=${owner.uid},gid=${owner.gid}`;
    else if (!isRootUser(user)) {
      tmpfs[sandboxHomeDirectory] = `${homeTmpfs},mode=1777`;
      warnings.push(
        `${key("user")}="${user}" is a name, so cordon cannot give HOME (${sandboxHomeDirectory}) to its uid: HOME is made writable for any user, which holds only if the image has no ${sandboxHomeDirectory} of its own (cordon's image has one, for uid 1000); give the uid ("1000:1000") to be sure`,
      );
    }
  }

  const settings: Omit<DockerSettings, "image"> = {
    containerPrefix: docker.containerPrefix,
    workdir,
    readOnlyRoot: docker.readOnlyRoot,
    tmpfs,
    network,
    user,
    initUser: initUserFor(user),
    capDrop,
    env,
    memoryBytes: memoryBytes ?? 0,
    memorySwapBytes: memorySwapBytes ?? 0,
    cpus: docker.cpus,
    pidsLimit: docker.pidsLimit,
    ulimits,
    seccompProfile,
    apparmorProfile,
    dns: [...docker.dns],
    extraHosts: [...docker.extraHosts],
    executor: docker.executor,
    runtime: docker.runtime,
  };
  return planned(settings, { issues, warnings });
}

/** nobody's uid, which owns nothing: the usual owner of the container's own processes. */
const nobody = 65534;

/**
 * The container's own user (its init and keep-alive; DockerSettings.initUser): nobody, or the uid
 * below it when the agent itself runs as nobody. The agent's processes run as `user` (every exec
 * names it), so they are another uid's and, with every capability dropped and no-new-privileges,
 * can neither ptrace nor signal init or the keep-alive. Checkpoints rely on that
 * (sandbox-quiet.ts): an agent that could ptrace the keep-alive could make it map a workspace file
 * for writing and change the file while the sandbox looks idle. A user named in the image
 * ("node") has a uid only the image knows: only the name "nobody" is taken to be 65534.
 */
export function initUserFor(user: string): string {
  const name = user.split(":")[0] ?? "";
  const agentIsNobody = name === "nobody" || (/^\d+$/.test(name) && Number(name) === nobody);
  const uid = agentIsNobody ? nobody - 1 : nobody;
  return `${uid}:${uid}`;
}

/**
 * `"auto"`: with a private copy (`none`, `ro`) and cordon not root, cordon's own uid:gid — the copy
 * is cordon's, and a non-root process cannot give it to anyone else. Otherwise the owner of a
 * mounted (`ro`, `rw`) workspace, so files the agent writes belong to the user, never root; else
 * 1000:1000 (root hands its copy over to that user). An explicit user is taken as written, with a warning for
 * root. The one place the container user is decided; `explain` prints what this returns.
 */
function resolveUser(input: DockerSettingsInput): Planned<string> {
  const { docker, key } = input;
  if (docker.user !== "auto") {
    if (!/^[A-Za-z0-9_.-]+(:[A-Za-z0-9_.-]+)?$/.test(docker.user)) {
      return planned(docker.user, {
        issues: [
          { path: key("user"), message: `"${docker.user}" is not "uid", "uid:gid" or "auto"` },
        ],
      });
    }
    if (isRootUser(docker.user)) {
      return planned(docker.user, {
        warnings: [`the sandbox runs as root (${key("user")}=${docker.user})`],
      });
    }
    return planned(docker.user);
  }
  const self = input.invokingUser;
  if (input.workspaceAccess !== "rw" && self && self.uid !== 0) {
    return planned(`${self.uid}:${self.gid}`);
  }
  const owner = input.workspaceOwner;
  if (input.workspaceAccess === "none" || owner === undefined) return planned(fallbackUser);
  if (owner.uid === 0) {
    if (input.workspaceAccess !== "rw") return planned(fallbackUser);
    return planned(fallbackUser, {
      warnings: [
        `the agent workspace is owned by root; the sandbox runs as ${fallbackUser} and may not be able to write it (set ${key("user")})`,
      ],
    });
  }
  return planned(`${owner.uid}:${owner.gid}`);
}
