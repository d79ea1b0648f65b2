// Reads the same things through each URL in URLS (a JSON list: venn with
// compressed answers, venn without) with ethers v6's JsonRpcProvider,
// and prints what it got per URL as JSON. Run by e2e/compress_js_test.go.
import { JsonRpcProvider, Network } from "ethers";

const urls = JSON.parse(process.env.URLS);
const block = Number(process.env.BLOCK);
const tx = process.env.TX;
const addr = process.env.ADDR;
const contract = process.env.CONTRACT;

const plain = (v) => JSON.parse(JSON.stringify(v, (_, x) => (typeof x === "bigint" ? x.toString() : x)));

async function read(url) {
  const network = Network.from(Number(process.env.CHAIN_ID));
  const p = new JsonRpcProvider(url, network, { staticNetwork: network, batchMaxCount: 1 });
  try {
    const b = await p.getBlock(block, true);
    return plain({
      block: b.toJSON(),
      txs: b.prefetchedTransactions.map((t) => t.toJSON()),
      receipt: (await p.getTransactionReceipt(tx)).toJSON(),
      logs: (await p.getLogs({ address: contract, fromBlock: 0, toBlock: block })).map((l) => l.toJSON()),
      balance: await p.getBalance(addr, block),
      code: await p.getCode(contract, block),
      receipts: await p.send("eth_getBlockReceipts", ["0x" + block.toString(16)]),
    });
  } finally {
    p.destroy();
  }
}

const out = [];
for (const u of urls) out.push(await read(u));
process.stdout.write(JSON.stringify(out));
