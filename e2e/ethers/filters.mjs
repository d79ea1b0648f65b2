// filters.mjs: ethers v6 over HTTP, polling venn the way a dapp back end
// does: contract.on("Ping", ...) (an eth_newFilter polled with
// eth_getFilterChanges on each new block) and provider.on("block", ...)
// (eth_blockNumber polled), on VENN_URL, behind a load balancer. Once the
// caller knows how far the chain went, it writes one JSON line on stdin
// ({"until": 123, "events": 10}); the script collects until it has seen
// block UNTIL and that many events, then prints one JSON object on stdout:
//   {"blocks": [numbers], "events": [{blockNumber, blockHash,
//    transactionHash, logIndex, removed}], "errors": ["..."], "timedOut": false}
// It gives up after TIMEOUT_MS (default 60000), prints what it has with
// "timedOut": true and exits 1. e2e/filters_test.go runs it.
import { Contract, JsonRpcProvider } from 'ethers'

// stdout carries the result alone: ethers logs a poll that failed with
// console.log ("@TODO Error: provider destroyed; cancelled request" when
// finish destroys the provider under a poll in flight), so its logging
// goes to stderr with the rest of the diagnostics.
console.log = console.info = console.debug = console.error

const url = process.env.VENN_URL
const contract = process.env.CONTRACT
if (!url || !contract) {
  process.stderr.write('filters.mjs: VENN_URL and CONTRACT must be set\n')
  process.exit(2)
}
const timeoutMs = Number(process.env.TIMEOUT_MS ?? '60000')

const blocks = []
const events = []
const errors = []
let until = null
let wantEvents = 0
let finished = false

const provider = new JsonRpcProvider(url, undefined, { staticNetwork: true, pollingInterval: 100, batchMaxCount: 1 })
provider.pollingInterval = 100
provider.on('error', (err) => errors.push(`provider: ${err?.shortMessage ?? err}`))

function finish(timedOut) {
  if (finished) return
  finished = true
  const out = JSON.stringify({ blocks, events, errors, timedOut }) + '\n'
  const exit = () => process.stdout.write(out, () => process.exit(timedOut ? 1 : 0))
  provider.removeAllListeners().then(() => provider.destroy()).then(exit, exit)
}

function check() {
  if (until === null) return
  if (blocks.length > 0 && Math.max(...blocks) >= until && events.length >= wantEvents) finish(false)
}

const c = new Contract(contract, ['event Ping(address indexed sender, uint256 value)'], provider)
await c.on('Ping', (sender, value, ev) => {
  const l = ev.log
  events.push({
    blockNumber: l.blockNumber,
    blockHash: l.blockHash,
    transactionHash: l.transactionHash,
    logIndex: l.index,
    removed: l.removed,
  })
  check()
})
await provider.on('block', (n) => {
  blocks.push(n)
  check()
})

let input = ''
process.stdin.setEncoding('utf8')
process.stdin.on('data', (chunk) => {
  input += chunk
  const nl = input.indexOf('\n')
  if (nl < 0 || until !== null) return
  try {
    const target = JSON.parse(input.slice(0, nl))
    wantEvents = Number(target.events ?? 0)
    until = Number(target.until)
  } catch (err) {
    errors.push(`stdin: ${err}`)
    finish(true)
    return
  }
  check()
})
setTimeout(() => finish(true), timeoutMs)
