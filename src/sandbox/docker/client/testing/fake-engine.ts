import { DockerEngine } from "../../engine.js";
import type {
  EngineDetails,
  ImageClient,
  ImageDetails,
  NetworkClient,
  NetworkDetails,
  SystemClient,
  VolumeClient,
  VolumeDetails,
} from "../engine-clients.js";
import { FakeContainerClient } from "./fake-container-client.js";

/**
 * A `DockerEngine` over in-memory clients, for unit tests of what sits on the engine: the
 * containers are a `FakeContainerClient`; images exist when the test puts them in `images`
 * (reference → details); networks and volumes are maps; the system answers like a plain Linux engine. Builds
 * and pulls are refused: they need a real engine.
 */
export function fakeEngine() {
  const containers = new FakeContainerClient();
  const images = new Map<string, ImageDetails>();
  const networks = new Map<string, NetworkDetails>();
  const volumes = new Map<string, VolumeDetails>();
  const imageClient: ImageClient = {
    inspect: (reference) => Promise.resolve(images.get(reference)),
    tags: (repository) =>
      Promise.resolve([...images.keys()].filter((tag) => tag.startsWith(`${repository}:`))),
    tag: (reference, repository, tag) => {
      const image = images.get(reference);
      if (image) images.set(`${repository}:${tag}`, image);
      return Promise.resolve();
    },
    build: () => Promise.reject(new Error("the fake engine builds no images")),
    pull: () => Promise.reject(new Error("the fake engine pulls no images")),
  };
  const matches = (labels: Readonly<Record<string, string>>, wanted: string[]) =>
    wanted.every((entry) => {
      const [key, value] = entry.split(/=(.*)/s);
      return value === undefined ? key! in labels : labels[key!] === value;
    });
  const networkClient: NetworkClient = {
    inspect: (name) => Promise.resolve(networks.get(name)),
    list: (labels) =>
      Promise.resolve([...networks.values()].filter((n) => matches(n.labels, labels))),
    create: ({ name, internal, labels }) => {
      if (networks.has(name)) return Promise.resolve(false);
      networks.set(name, {
        id: `net-${name}`,
        name,
        internal,
        labels,
        createdAtMs: Date.now(),
        subnets: [],
      });
      return Promise.resolve(true);
    },
    remove: (name) => {
      for (const [key, network] of networks) {
        if (key === name || network.id === name) networks.delete(key);
      }
      return Promise.resolve();
    },
  };
  const volumeClient: VolumeClient = {
    inspect: (name) => Promise.resolve(volumes.get(name)),
    list: (labels) =>
      Promise.resolve([...volumes.values()].filter((v) => matches(v.labels, labels))),
    create: ({ name, labels }) => {
      if (!volumes.has(name)) {
        const mountpoint = `/var/lib/docker/volumes/${name}/_data`;
        volumes.set(name, { name, mountpoint, labels, createdAtMs: Date.now() });
      }
      return Promise.resolve();
    },
    remove: (name) => {
      volumes.delete(name);
      return Promise.resolve();
    },
  };
  const system: SystemClient = {
    describe: () =>
      Promise.resolve({
        serverVersion: "20.10.24",
        apiVersion: "1.41",
        operatingSystem: "Debian GNU/Linux 12 (bookworm)",
        architecture: "x86_64",
        storageDriver: "overlay2",
        cgroupVersion: "1",
        runtimes: ["runc"],
        runtimeArgs: { runc: [] },
        defaultRuntime: "runc",
        securityOptions: ["name=seccomp,profile=default"],
      } satisfies EngineDetails),
  };
  const engine = new DockerEngine({
    clients: {
      containers,
      images: imageClient,
      networks: networkClient,
      volumes: volumeClient,
      system,
    },
  });
  return { engine, containers, images, networks, volumes };
}
