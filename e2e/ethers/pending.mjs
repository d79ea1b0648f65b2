// pending.mjs: ethers v6, over WebSocket, listening for pending
// transactions the way a bot does: provider.on("pending", hash => ...),
// which is an eth_subscribe("newPendingTransactions") on VENN_WS_URL.
// Once the caller knows what it sent, it writes one JSON line on stdin
// ({"hashes": ["0x..", ...]}); the script collects until it has seen each
// of them, then prints one JSON object on stdout (and each hash as it
// arrives on stderr, "pending 0x.."):
//   {"hashes": [every hash ethers handed over, in order], "errors": ["..."],
//    "timedOut": false}
// An error ethers raises (a refused eth_subscribe is an unhandled
// rejection, which ends a Node process) is recorded and ends the run. It
// gives up after TIMEOUT_MS (default 60000), prints what it has with
// "timedOut": true and exits 1. e2e/ethers_test.go runs it; `npm ci` in
// this folder installs ethers.
import { WebSocketProvider } from 'ethers'

// stdout carries the result alone: ethers logs some failures with
// console.log ("@TODO Error: ..."; see filters.mjs), so its logging goes to
// stderr with the rest of the diagnostics.
console.log = console.info = console.debug = console.error

const url = process.env.VENN_WS_URL
if (!url) {
  process.stderr.write('pending.mjs: VENN_WS_URL is not set\n')
  process.exit(2)
}
const timeoutMs = Number(process.env.TIMEOUT_MS ?? '60000')

const hashes = []
const errors = []
let want = null // the hashes to wait for, once known
let finished = false
let provider = null

function finish(timedOut) {
  if (finished) return
  finished = true
  const out = JSON.stringify({ hashes, errors, timedOut }) + '\n'
  const exit = () => process.stdout.write(out, () => process.exit(timedOut || errors.length > 0 ? 1 : 0))
  if (provider) provider.destroy().then(exit, exit)
  else exit()
}

function check() {
  if (want === null) return
  const seen = new Set(hashes)
  if (want.every((h) => seen.has(h))) finish(false)
}

// What would otherwise crash the process is the test's failure to report.
process.on('unhandledRejection', (err) => {
  errors.push(`unhandled rejection: ${err?.shortMessage ?? err?.message ?? err}`)
  finish(false)
})
process.on('uncaughtException', (err) => {
  errors.push(`uncaught exception: ${err?.shortMessage ?? err?.message ?? err}`)
  finish(false)
})

let input = ''
process.stdin.setEncoding('utf8')
process.stdin.on('data', (chunk) => {
  input += chunk
  const nl = input.indexOf('\n')
  if (nl < 0 || want !== null) return
  try {
    want = JSON.parse(input.slice(0, nl)).hashes.map((h) => h.toLowerCase())
  } catch (err) {
    errors.push(`stdin: ${err}`)
    finish(true)
    return
  }
  check()
})

setTimeout(() => finish(true), timeoutMs).unref()

provider = new WebSocketProvider(url)
provider.on('error', (err) => {
  errors.push(`provider error: ${err?.shortMessage ?? err?.message ?? err}`)
})
await provider.on('pending', (hash) => {
  if (finished) return
  hashes.push(String(hash).toLowerCase())
  // For the caller's warm-up: it sends until it sees one of its own here.
  process.stderr.write(`pending ${String(hash).toLowerCase()}\n`)
  check()
})
