// filters.mjs: viem over HTTP, polling venn through a load balancer the
// way a dapp or bot does: watchContractEvent (poll: true, which makes an
// eth_newFilter and polls it with eth_getFilterChanges), watchBlocks
// (poll: true, eth_blockNumber then each block), and a block filter of its
// own (createBlockFilter, getFilterChanges every 100 ms). Once the caller
// knows how far the chain went, it writes one JSON line on stdin
// ({"until": 123, "events": 10}); the script collects until it has seen
// block UNTIL from both block sources and that many events, then prints
// one JSON object on stdout:
//   {"blocks": [{number, hash}], "hashes": ["0x.."], "events": [{...log}],
//    "errors": ["..."], "timedOut": false}
// It gives up after TIMEOUT_MS (default 60000), prints what it has with
// "timedOut": true and exits 1. e2e/filters_test.go runs it.
import { createPublicClient, http, parseAbiItem } from 'viem'

const ping = parseAbiItem('event Ping(address indexed sender, uint256 value)')
const url = process.env.VENN_URL
const contract = process.env.CONTRACT
if (!url || !contract) {
  process.stderr.write('filters.mjs: VENN_URL and CONTRACT must be set\n')
  process.exit(2)
}
const timeoutMs = Number(process.env.TIMEOUT_MS ?? '60000')

const blocks = []
const hashes = []
const events = []
const errors = []
let until = null
let wantEvents = 0
let finished = false
const str = (v) => (typeof v === 'bigint' ? v.toString() : v)

const client = createPublicClient({ transport: http(url), pollingInterval: 100 })
let unwatchBlocks = () => {}
let unwatchEvent = () => {}
let timer = null

function finish(timedOut) {
  if (finished) return
  finished = true
  unwatchBlocks()
  unwatchEvent()
  clearInterval(timer)
  const out = JSON.stringify({ blocks, hashes, events, errors, timedOut }) + '\n'
  process.stdout.write(out, () => process.exit(timedOut ? 1 : 0))
}

async function check() {
  if (until === null || finished) return
  if (events.length < wantEvents) return
  if (!blocks.some((b) => BigInt(b.number) >= until)) return
  // The block filter's hashes: the last must be block until's or later.
  const last = hashes.length > 0 ? await client.getBlock({ blockHash: hashes[hashes.length - 1] }).catch(() => null) : null
  if (last && last.number >= until) finish(false)
}

unwatchEvent = client.watchContractEvent({
  address: contract,
  abi: [ping],
  eventName: 'Ping',
  poll: true,
  pollingInterval: 100,
  onLogs(logs) {
    for (const l of logs) {
      events.push({
        blockNumber: str(l.blockNumber),
        blockHash: l.blockHash,
        transactionHash: l.transactionHash,
        logIndex: l.logIndex,
        removed: l.removed,
      })
    }
    check()
  },
  onError(err) {
    errors.push(`watchContractEvent: ${err?.shortMessage ?? err}`)
  },
})
unwatchBlocks = client.watchBlocks({
  poll: true,
  pollingInterval: 100,
  emitMissed: true,
  onBlock(b) {
    blocks.push({ number: str(b.number), hash: b.hash })
    check()
  },
  onError(err) {
    errors.push(`watchBlocks: ${err?.shortMessage ?? err}`)
  },
})
const filter = await client.createBlockFilter()
let polling = false
timer = setInterval(async () => {
  if (polling || finished) return
  polling = true
  try {
    hashes.push(...(await client.getFilterChanges({ filter })))
    check()
  } catch (err) {
    errors.push(`block filter: ${err?.shortMessage ?? err}`)
  } finally {
    polling = false
  }
}, 100)

let input = ''
process.stdin.setEncoding('utf8')
process.stdin.on('data', (chunk) => {
  input += chunk
  const nl = input.indexOf('\n')
  if (nl < 0 || until !== null) return
  try {
    const target = JSON.parse(input.slice(0, nl))
    wantEvents = Number(target.events ?? 0)
    until = BigInt(target.until)
  } catch (err) {
    errors.push(`stdin: ${err}`)
    finish(true)
    return
  }
  check()
})
setTimeout(() => finish(true), timeoutMs)
