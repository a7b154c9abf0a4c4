/**
 * `cordon mcp`: a session's policed sandbox offered to any MCP client. The only module that
 * imports the MCP SDK.
 */
export {
  McpSession,
  mcpToolDefinitions,
  type McpCallOptions,
  type McpCallResult,
  type McpClientInfo,
  type McpSessionOptions,
} from "./mcp-session.js";
export { createMcpServer, serverInstructions, type McpServerOptions } from "./mcp-server.js";
export { serveStdio, type ServeStdioOptions } from "./serve-stdio.js";
export { serveHttp, mcpPath, type ServeHttpOptions } from "./serve-http.js";
export {
  allowedHostsFor,
  checkRequest,
  isLoopback,
  parseListenAddress,
  type ListenAddress,
  type Refusal,
  type RequestGuardOptions,
} from "./http-guard.js";
export {
  claudeHostTools,
  claudeRecipe,
  clientConfig,
  mcpClients,
  serverName,
  type McpClient,
  type McpEndpoint,
} from "./client-config.js";
