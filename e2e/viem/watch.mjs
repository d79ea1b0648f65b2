// watch.mjs: viem, over WebSocket, watching venn the way a dapp or bot
// does. It opens one viem client on VENN_WS_URL and runs
//   - watchBlocks with poll: false (an eth_subscribe("newHeads"); for each
//     head viem fetches the block with eth_getBlockByNumber and hands it
//     to onBlock when the answer comes),
//   - watchEvent for the Ping event of CONTRACT (an eth_subscribe("logs")),
//   - and, on the same connection, a plain newHeads subscription through
//     viem's transport, which records the heads in the order venn sent them.
// It collects until it has seen block UNTIL and EVENTS events; both come
// from the environment or, when UNTIL is not set, as one JSON line on
// stdin ({"until": 123, "events": 10}) once the caller knows how far the
// chain will go. Then it prints one JSON object on stdout:
//   {"blocks": [{number, hash, parentHash}], "heads": [the same, as sent],
//    "events": [{...log, args}], "errors": ["..."], "timedOut": false}
// Numbers are decimal strings (viem hands out bigints). It gives up after
// TIMEOUT_MS (default 60000), prints what it has with "timedOut": true and
// exits 1. e2e/viem_test.go runs it; `npm ci` in this folder installs viem.
import { createPublicClient, parseAbiItem, webSocket } from 'viem'

// The event the test contract emits: keep in step with pingSignature in
// e2e/viem_test.go.
const ping = parseAbiItem('event Ping(address indexed sender, uint256 value)')

function need(name) {
  const v = process.env[name]
  if (!v) {
    process.stderr.write(`watch.mjs: ${name} is not set\n`)
    process.exit(2)
  }
  return v
}

const url = need('VENN_WS_URL')
const contract = need('CONTRACT')
// The target: the last block to wait for and how many events; null until
// known.
let until = process.env.UNTIL ? BigInt(process.env.UNTIL) : null
let wantEvents = Number(process.env.EVENTS ?? '0')
const timeoutMs = Number(process.env.TIMEOUT_MS ?? '60000')

const blocks = [] // watchBlocks' onBlock, in the order viem called it
const heads = [] // the raw newHeads notifications, in wire order
const events = []
const errors = []

const str = (v) => (typeof v === 'bigint' ? v.toString() : v)

// Reconnects would hide a dropped connection: the test wants to see it.
const client = createPublicClient({ transport: webSocket(url, { reconnect: false }) })

let finished = false
let unwatchBlocks = () => {}
let unwatchEvent = () => {}
let unsubscribeHeads = () => {}

function finish(timedOut) {
  if (finished) return
  finished = true
  unwatchBlocks()
  unwatchEvent()
  unsubscribeHeads()
  const out = JSON.stringify({ blocks, heads, events, errors, timedOut }) + '\n'
  process.stdout.write(out, () => process.exit(timedOut ? 1 : 0))
}

function check() {
  if (until === null) return
  if (covered(blocks) && covered(heads) && events.length >= wantEvents) finish(false)
}

// covered: list holds every block from its lowest up to until.
function covered(list) {
  if (list.length === 0) return false
  const have = new Set(list.map((b) => BigInt(b.number)))
  let n = [...have].reduce((a, b) => (b < a ? b : a))
  for (; n <= until; n++) if (!have.has(n)) return false
  return true
}

if (until === null) {
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
}

unwatchBlocks = client.watchBlocks({
  poll: false,
  onBlock(block) {
    if (finished) return
    if (!block) {
      // viem hands over undefined when its eth_getBlockByNumber for a
      // head failed.
      errors.push('watchBlocks: a head arrived but viem could not fetch its block')
      return
    }
    blocks.push({ number: str(block.number), hash: block.hash, parentHash: block.parentHash })
    check()
  },
  onError(err) {
    errors.push(`watchBlocks: ${err?.shortMessage ?? err}`)
  },
})

unwatchEvent = client.watchEvent({
  address: contract,
  event: ping,
  poll: false,
  onLogs(logs) {
    if (finished) return
    for (const l of logs) {
      events.push({
        eventName: l.eventName,
        address: l.address,
        blockNumber: str(l.blockNumber),
        blockHash: l.blockHash,
        transactionHash: l.transactionHash,
        logIndex: l.logIndex,
        removed: l.removed,
        args: { sender: l.args.sender, value: str(l.args.value) },
      })
    }
    check()
  },
  onError(err) {
    errors.push(`watchEvent: ${err?.shortMessage ?? err}`)
  },
})

client.transport
  .subscribe({
    params: ['newHeads'],
    onData(data) {
      if (finished) return
      const h = data.result
      heads.push({ number: BigInt(h.number).toString(), hash: h.hash, parentHash: h.parentHash })
      check()
    },
    onError(err) {
      errors.push(`newHeads: ${err?.shortMessage ?? err}`)
    },
  })
  .then(({ unsubscribe }) => {
    unsubscribeHeads = unsubscribe
  })
  .catch((err) => errors.push(`newHeads: subscribe: ${err?.shortMessage ?? err}`))

// Also keeps the process alive until finish() ends it.
setTimeout(() => finish(true), timeoutMs)
