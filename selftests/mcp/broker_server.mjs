// A broker's MCP server built with the official SDK, its tools named and
// shaped as Alpaca's MCP server has them (place_stock_order with symbol,
// side, quantity, order_type, limit_price; cancel_order_by_id; ...). It
// trades nothing: every call that reaches it is appended to the file named
// by its first argument (one JSON line each), so a test can tell what the
// guard let through. Test only; stdio.
import fs from "node:fs";
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { CallToolRequestSchema, ListToolsRequestSchema } from "@modelcontextprotocol/sdk/types.js";

const received = process.argv[2];
if (!received) throw new Error("usage: broker_server.mjs RECEIVED_FILE");
const server = new Server({ name: "broker", version: "1.0.0" }, { capabilities: { tools: {} } });

const object = (properties, required = []) => ({ type: "object", properties, required });
const tools = [
  {
    name: "place_stock_order",
    description: "Place a stock order.",
    inputSchema: object(
      {
        symbol: { type: "string" },
        side: { type: "string", enum: ["buy", "sell"] },
        quantity: { type: "number" },
        order_type: { type: "string", enum: ["market", "limit"] },
        limit_price: { type: "number" },
      },
      ["symbol", "side", "quantity", "order_type"],
    ),
  },
  { name: "cancel_order_by_id", description: "Cancel an order.", inputSchema: object({ order_id: { type: "string" } }) },
  {
    name: "withdraw_funds",
    description: "Withdraw cash to the linked bank account.",
    inputSchema: object({ amount: { type: "number" } }, ["amount"]),
  },
  {
    name: "update_bank_account",
    description: "Change the linked bank account.",
    inputSchema: object({ routing_number: { type: "string" }, account_number: { type: "string" } }),
  },
  {
    name: "get_account_info",
    description: "Balances and buying power.",
    inputSchema: object({}),
    annotations: { readOnlyHint: true },
  },
];

server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools }));

let orders = 0;
server.setRequestHandler(CallToolRequestSchema, async (req) => {
  const { name, arguments: args = {} } = req.params;
  fs.appendFileSync(received, JSON.stringify({ name, args }) + "\n");
  if (name === "place_stock_order") {
    orders += 1;
    return { content: [{ type: "text", text: `order ${orders} accepted: ${args.side} ${args.quantity} ${args.symbol}` }] };
  }
  if (name === "get_account_info") return { content: [{ type: "text", text: "cash 100000" }] };
  if (tools.some((t) => t.name === name)) return { content: [{ type: "text", text: `${name}: done` }] };
  return { content: [{ type: "text", text: `no tool ${name}` }], isError: true };
});

await server.connect(new StdioServerTransport());
