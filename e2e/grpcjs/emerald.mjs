// @grpc/grpc-js with @grpc/proto-loader, loading venn's emerald/proto
// unchanged, against venn's emerald.Blockchain: one NativeCall, then
// SubscribeHead and NativeSubscribe newHeads and logs until the test says
// how far to watch. Run by e2e/grpcjs_test.go, which compares what it
// prints with geth's own answers.
//
// Environment: VENN_GRPC_ADDR (host:port), PROTO_DIR (emerald/proto),
// API_KEY (sent as x-api-key metadata), CHAIN (a ChainRef name), CALLS (a
// JSON array of {method, params}, params a JSON array's text), LOGS_FILTER
// (the logs subscription's filter, JSON), TIMEOUT_MS.
//
// stdout: {"ready": true} once the call has answered and SubscribeHead
// has sent its first head (the test sees the NativeSubscribe streams open
// in venn's metrics), then one JSON object with what came (bytes as
// base64). stdin: {"until": N, "logs": K}: the script
// ends once both head streams have reached block N and K logs came.
import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";

const env = (name) => {
  const v = process.env[name];
  if (v === undefined || v === "") throw new Error(`${name} is not set`);
  return v;
};

const out = {
  calls: [],
  callError: null,
  heads: [],
  newHeads: [],
  logs: [],
  errors: [],
  timedOut: false,
};
const print = (o) => process.stdout.write(JSON.stringify(o) + "\n");

// The protos as they are in the repository; field names as written
// (keepCase), uint64 as decimal strings, enums by name, bytes as Buffers.
const def = protoLoader.loadSync("blockchain.proto", {
  includeDirs: [env("PROTO_DIR")],
  keepCase: true,
  longs: String,
  enums: String,
  defaults: true,
  oneofs: true,
});
const emerald = grpc.loadPackageDefinition(def).emerald;
const client = new emerald.Blockchain(env("VENN_GRPC_ADDR"), grpc.credentials.createInsecure());
const md = new grpc.Metadata();
md.add("x-api-key", env("API_KEY"));
const chain = env("CHAIN");

const timer = setTimeout(() => {
  out.timedOut = true;
  finish();
}, Number(env("TIMEOUT_MS")));

let finished = false;
const streams = [];
function finish() {
  if (finished) return;
  finished = true;
  clearTimeout(timer);
  for (const s of streams) s.cancel();
  client.close();
  print(out);
}

// nativeCall runs one NativeCall and resolves with its items.
function nativeCall(calls) {
  return new Promise((resolve, reject) => {
    const items = [];
    const call = client.NativeCall(
      {
        chain,
        sorted: true,
        items: calls.map((c, i) => ({ id: i + 1, method: c.method, payload: Buffer.from(c.params) })),
      },
      md,
    );
    call.on("data", (it) => items.push(it));
    call.on("error", reject);
    call.on("end", () => resolve(items));
  });
}

// follow opens a server stream and hands each message to onData; the
// stream's end before finish is an error.
function follow(name, call, onData) {
  streams.push(call);
  call.on("data", (m) => {
    try {
      onData(m);
    } catch (e) {
      out.errors.push(`${name}: ${e.message}`);
    }
    check();
  });
  call.on("error", (e) => {
    if (!finished) {
      out.errors.push(`${name}: ${e.code} ${e.details}`);
      finish();
    }
  });
  call.on("end", () => {
    if (!finished) {
      out.errors.push(`${name}: the stream ended`);
      finish();
    }
  });
  return call;
}

let goal = null; // {until, logs} from stdin
const top = { heads: 0n, newHeads: 0n };
function check() {
  if (finished || goal === null) return;
  if (top.heads >= goal.until && top.newHeads >= goal.until && out.logs.length >= goal.logs) finish();
}

try {
  const calls = JSON.parse(env("CALLS"));
  for (const it of await nativeCall(calls)) {
    out.calls.push({
      id: it.id,
      succeed: it.succeed,
      payload: it.payload.toString("base64"),
      item_error_code: it.item_error_code,
      error_message: it.error_message,
    });
  }
} catch (e) {
  out.callError = `${e.code} ${e.details ?? e.message}`;
}

let firstHead = true;
follow("SubscribeHead", client.SubscribeHead({ type: chain }, md), (h) => {
  out.heads.push({
    chain: h.chain,
    height: h.height,
    block_id: h.block_id,
    parent_block_id: h.parent_block_id,
    timestamp: h.timestamp,
    reorg: h.reorg,
  });
  if (BigInt(h.height) > top.heads) top.heads = BigInt(h.height);
  if (firstHead) {
    firstHead = false;
    print({ ready: true });
  }
});
follow(
  "NativeSubscribe newHeads",
  client.NativeSubscribe({ chain, method: "newHeads" }, md),
  (it) => {
    if (it.heartbeat) return;
    out.newHeads.push(it.payload.toString("base64"));
    const n = BigInt(JSON.parse(it.payload.toString()).number);
    if (n > top.newHeads) top.newHeads = n;
  },
);
follow(
  "NativeSubscribe logs",
  client.NativeSubscribe({ chain, method: "logs", payload: Buffer.from(env("LOGS_FILTER")) }, md),
  (it) => {
    if (!it.heartbeat) out.logs.push(it.payload.toString("base64"));
  },
);

let input = "";
process.stdin.setEncoding("utf8");
process.stdin.on("data", (chunk) => {
  input += chunk;
  const nl = input.indexOf("\n");
  if (nl < 0 || goal !== null) return;
  const g = JSON.parse(input.slice(0, nl));
  goal = { until: BigInt(g.until), logs: g.logs };
  check();
});
