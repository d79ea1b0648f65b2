// Reads the same things through each URL in URLS (a JSON list: venn with
// compressed answers, venn without) with viem's HTTP transport, and
// prints what it got per URL as JSON. Run by e2e/compress_js_test.go.
import { createPublicClient, http } from "viem";

const urls = JSON.parse(process.env.URLS);
const block = BigInt(process.env.BLOCK);
const tx = process.env.TX;
const addr = process.env.ADDR;
const contract = process.env.CONTRACT;

const plain = (v) => JSON.parse(JSON.stringify(v, (_, x) => (typeof x === "bigint" ? x.toString() : x)));

async function read(url) {
  const c = createPublicClient({ transport: http(url, { batch: false, retryCount: 0 }) });
  return plain({
    chainId: await c.getChainId(),
    block: await c.getBlock({ blockNumber: block, includeTransactions: true }),
    receipt: await c.getTransactionReceipt({ hash: tx }),
    logs: await c.getLogs({ address: contract, fromBlock: 0n, toBlock: block }),
    balance: await c.getBalance({ address: addr, blockNumber: block }),
    code: await c.getCode({ address: contract, blockNumber: block }),
    receipts: await c.request({ method: "eth_getBlockReceipts", params: ["0x" + block.toString(16)] }),
  });
}

const out = [];
for (const u of urls) out.push(await read(u));
process.stdout.write(JSON.stringify(out));
