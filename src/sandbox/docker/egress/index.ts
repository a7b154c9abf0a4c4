export {
  EgressProxies,
  egressLabels,
  type EgressProxiesOptions,
  type EgressProxySummary,
} from "./egress-proxies.js";
export { parseEgressLine, type EgressDecision } from "./access-log.js";
export { squidConfig } from "./squid-config.js";
export { upstreamProxyFromEnv, type UpstreamProxy } from "./upstream-proxy.js";
export { EgressProxyImage, egressProxyImageRepository } from "./proxy-image.js";
export {
  anthropicApiUrl,
  createModelGateway,
  type ModelGateway,
  type ModelGatewayCall,
  type ModelGatewayOptions,
} from "./model-gateway.js";
export {
  detectTlsInspection,
  type TlsInspection,
  type TlsInspectionOptions,
} from "./tls-inspection.js";
