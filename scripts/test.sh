#!/usr/bin/env bash
# The one command that runs every venn test on a fresh machine:
#   scripts/test.sh
# It checks the toolchain, makes sure Redis (127.0.0.1:6379) and Postgres
# (127.0.0.1:5432) answer, builds geth v1.17.10 for the end-to-end tests
# (exported as VENN_GETH), installs the e2e viem, ethers and grpc-js
# tests' Node packages (npm ci in e2e/viem, e2e/ethers and e2e/grpcjs),
# installs promtool (Debian's prometheus package) for the alert rules'
# tests and chromium for the status page's browser tests, which fail
# without it (apt-get, as root), nats-server (apt-get) and the nats CLI
# (built at a pinned version, exported as VENN_NATS_CLI) for the NATS
# tests, grpcurl (built at a pinned version, exported as VENN_GRPCURL) for
# the gRPC tests, runs go vet and the race-enabled test suite, and, when
# ../shared/conformance exists, replays the execution-apis conformance
# suite through a freshly built venn in front of geth.
# Non-interactive; stops at the first failure. Either way the last line it
# prints is one summary: "test.sh: PASS: ..." or "test.sh: FAIL: <what>".
set -euo pipefail

cd "$(dirname "$0")/.."
ROOT=$(pwd)
GETH_VERSION=v1.17.10
# The nats CLI the NATS tests drive (natscli; v0.5.1 is not to be used).
NATSCLI_VERSION=v0.5.0
# grpcurl, the reflection-driven client the gRPC tests drive (package app).
GRPCURL_VERSION=v1.9.3
CACHE=${CACHE:-$HOME/.cache/venn-conformance}
SHARED=$ROOT/../shared
CONFORMANCE=$SHARED/conformance/run.sh

current="setup"    # the step running: what a failure names
failure=""         # a better account of the failure than the step, when known
conformance="not run"
cleanup=()         # files and folders removed on exit

step() { current=$*; printf '\n==> %s\n' "$*"; }
die() { failure=$*; printf 'test.sh: %s\n' "$*" >&2; exit 1; }

# finish prints the one summary line, last, whatever ended the script.
finish() {
  local rc=$?
  trap - EXIT
  [ ${#cleanup[@]} -eq 0 ] || rm -rf "${cleanup[@]}"
  if [ "$rc" -eq 0 ]; then
    printf '\ntest.sh: PASS: vet ok, go test -race ok, conformance %s\n' "$conformance"
  else
    printf '\ntest.sh: FAIL: %s (exit %d)\n' "${failure:-step \"$current\" failed}" "$rc"
  fi
  exit "$rc"
}
trap finish EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# failed_tests LOG: the packages and top-level tests go test reported as
# failing in LOG, on one line.
failed_tests() {
  local pkgs tests
  pkgs=$(grep -E '^FAIL[[:space:]]+[^[:space:]]+' "$1" | awk '{print $2}' |
    sed "s|^github.com/venn-gateway/venn/||" | sort -u | paste -sd ' ' -)
  tests=$(grep -E '^--- FAIL: ' "$1" | awk '{print $3}' | sort -u | sed -n 1,8p | paste -sd ' ' -)
  printf 'packages: %s; tests: %s' "${pkgs:-none named}" "${tests:-none named}"
}

# The conformance replay needs the shared checkout next to this one; say
# at once whether it will run, not only at the end.
if [ -f "$CONFORMANCE" ]; then
  echo "test.sh: the conformance replay will run at the end ($CONFORMANCE)"
else
  conformance="skipped (no ../shared/conformance/run.sh)"
  echo "test.sh: the conformance replay will be SKIPPED: ../shared/conformance/run.sh does not exist next to this repository (it comes with the shared checkout)"
fi

# answers HOST PORT: true when something accepts TCP connections there.
answers() { (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null; }

# wait_for HOST PORT NAME: poll for up to 30 s.
wait_for() {
  for _ in $(seq 1 300); do
    answers "$1" "$2" && return 0
    sleep 0.1
  done
  die "$3 did not start answering on $1:$2"
}

step "toolchain"
command -v go >/dev/null 2>&1 || die "go is not installed: get Go 1.26 from https://go.dev/dl/ (e.g. tar -C /usr/local -xzf go1.26.*.linux-amd64.tar.gz; export PATH=\$PATH:/usr/local/go/bin)"
command -v curl >/dev/null 2>&1 || die "curl is missing (the README's quick start, which a test runs, uses it): apt-get install -y curl"
go version

step "redis on 127.0.0.1:6379"
if ! answers 127.0.0.1 6379; then
  command -v redis-server >/dev/null 2>&1 || die "redis-server is missing: apt-get install -y redis-server postgresql"
  redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no >/dev/null
  wait_for 127.0.0.1 6379 redis
fi
echo "redis answers"

step "postgres on 127.0.0.1:5432"
if ! answers 127.0.0.1 5432; then
  command -v pg_ctlcluster >/dev/null 2>&1 || die "postgres is missing: apt-get install -y redis-server postgresql"
  pgver=$(ls /etc/postgresql 2>/dev/null | sort -V | tail -1)
  [ -n "$pgver" ] || die "no cluster under /etc/postgresql: apt-get install -y redis-server postgresql"
  if [ "$(id -u)" != 0 ] && [ "$(id -un)" != postgres ]; then
    die "postgres is installed but not running, and starting it needs root: sudo pg_ctlcluster $pgver main start"
  fi
  pg_ctlcluster --skip-systemctl-redirect "$pgver" main start || die "could not start postgres: sudo pg_ctlcluster $pgver main start"
  wait_for 127.0.0.1 5432 postgres
fi
echo "postgres answers"

step "geth $GETH_VERSION"
GETH=$CACHE/bin/geth
if [ ! -x "$GETH" ]; then
  if [ -x "$CONFORMANCE" ]; then
    CACHE=$CACHE bash "$CONFORMANCE" build
  else
    mkdir -p "$CACHE/bin"
    echo "building geth $GETH_VERSION (about 3 minutes on 2 cores)..."
    GOBIN=$CACHE/bin CGO_ENABLED=0 go install "github.com/ethereum/go-ethereum/cmd/geth@$GETH_VERSION"
  fi
fi
[ -x "$GETH" ] || die "geth was not built at $GETH"
export VENN_GETH=$GETH
echo "VENN_GETH=$VENN_GETH"

step "viem, ethers and grpc-js for the e2e Node.js tests (npm ci in e2e/viem, e2e/ethers, e2e/grpcjs)"
command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1 ||
  die "node and npm are missing (the e2e viem, ethers and grpc-js tests need Node.js 18 or newer): apt-get install -y nodejs npm"
node --version
# Each e2e folder and the package it is named for.
for project in viem:viem ethers:ethers grpcjs:@grpc/grpc-js; do
  name=${project%%:*} pkg=${project#*:}
  dir=$ROOT/e2e/$name
  # npm ci once per package-lock.json: the stamp is the lock it installed.
  if ! cmp -s "$dir/package-lock.json" "$dir/node_modules/.venn-installed-lock" 2>/dev/null; then
    (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error) || die "npm ci in e2e/$name failed"
    cp "$dir/package-lock.json" "$dir/node_modules/.venn-installed-lock"
  fi
  echo "$pkg $(node -p "require('$dir/node_modules/$pkg/package.json').version")"
done

step "haproxy for the filter tests' load balancer (e2e/filters_test.go)"
# The test puts a real load balancer in front of two replicas; without
# haproxy it fails, saying how to install it.
if ! command -v haproxy >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y --no-install-recommends haproxy >/dev/null ||
      { apt-get update >/dev/null && apt-get install -y --no-install-recommends haproxy >/dev/null; } ||
      die "could not install Debian's haproxy: apt-get install -y haproxy"
  else
    die "haproxy is missing (the filter tests need it): apt-get install -y haproxy, as root"
  fi
fi
haproxy -v | sed -n 1p

step "nats-server and the nats CLI $NATSCLI_VERSION for the NATS tests (package nats, app)"
# The tests start their own nats-server (with JetStream) on a free port;
# without it they fail, saying how to install it. The nats CLI, built at a
# pinned version like geth, is the second client they check against.
if ! command -v nats-server >/dev/null 2>&1 && [ ! -x /usr/sbin/nats-server ] && [ -z "${VENN_NATS_SERVER:-}" ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y --no-install-recommends nats-server >/dev/null ||
      { apt-get update >/dev/null && apt-get install -y --no-install-recommends nats-server >/dev/null; } ||
      die "could not install Debian's nats-server: apt-get install -y nats-server"
  else
    die "nats-server is missing (the NATS tests need it): apt-get install -y nats-server, as root, or set VENN_NATS_SERVER"
  fi
fi
"$(command -v nats-server || echo /usr/sbin/nats-server)" --version
NATSCLI=$CACHE/bin/nats
if [ ! -x "$NATSCLI" ] || ! "$NATSCLI" --version 2>&1 | grep "${NATSCLI_VERSION#v}" >/dev/null; then
  mkdir -p "$CACHE/bin"
  echo "building the nats CLI $NATSCLI_VERSION..."
  GOBIN=$CACHE/bin CGO_ENABLED=0 go install "github.com/nats-io/natscli/nats@$NATSCLI_VERSION" ||
    die "could not build the nats CLI: go install github.com/nats-io/natscli/nats@$NATSCLI_VERSION"
fi
export VENN_NATS_CLI=$NATSCLI
echo "VENN_NATS_CLI=$VENN_NATS_CLI ($("$NATSCLI" --version 2>&1))"

step "grpcurl $GRPCURL_VERSION for the gRPC tests (package app)"
# A client that knows the service only through server reflection.
GRPCURL=$CACHE/bin/grpcurl
# grpcurl built by go install prints no version: its build info has it.
if [ ! -x "$GRPCURL" ] || ! go version -m "$GRPCURL" | grep "github.com/fullstorydev/grpcurl[[:space:]]*$GRPCURL_VERSION" >/dev/null; then
  mkdir -p "$CACHE/bin"
  echo "building grpcurl $GRPCURL_VERSION..."
  GOBIN=$CACHE/bin CGO_ENABLED=0 go install "github.com/fullstorydev/grpcurl/cmd/grpcurl@$GRPCURL_VERSION" ||
    die "could not build grpcurl: go install github.com/fullstorydev/grpcurl/cmd/grpcurl@$GRPCURL_VERSION"
fi
export VENN_GRPCURL=$GRPCURL
echo "VENN_GRPCURL=$VENN_GRPCURL ($GRPCURL_VERSION)"

step "promtool for the alert rules' tests (Debian's prometheus package)"
# deploy's tests run promtool check rules and promtool test rules; without
# promtool they skip, saying so.
if ! command -v promtool >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y --no-install-recommends prometheus >/dev/null ||
      { apt-get update >/dev/null && apt-get install -y --no-install-recommends prometheus >/dev/null; } ||
      echo "test.sh: could not install Debian's prometheus package: the promtool tests will be SKIPPED"
  else
    echo "test.sh: promtool is missing (apt-get install -y prometheus, as root): the promtool tests will be SKIPPED"
  fi
fi
command -v promtool >/dev/null 2>&1 && promtool --version 2>&1 | sed -n 1p

step "chromium for the status page's browser tests (e2e/statuspage)"
# They require it here (VENN_REQUIRE_CHROMIUM): without chromium they fail,
# not skip.
export VENN_REQUIRE_CHROMIUM=1
if ! command -v chromium >/dev/null 2>&1 && [ -z "${VENN_CHROMIUM:-}" ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y --no-install-recommends chromium >/dev/null ||
      { apt-get update >/dev/null && apt-get install -y --no-install-recommends chromium >/dev/null; } ||
      echo "test.sh: could not install Debian's chromium: the status page's browser tests will FAIL"
  else
    echo "test.sh: chromium is missing (apt-get install -y chromium, as root): the status page's browser tests will FAIL"
  fi
fi
command -v chromium >/dev/null 2>&1 && chromium --version 2>/dev/null | sed -n 1p

step "go vet"
go vet ./...

step "go test -race"
testlog=$(mktemp /tmp/venn-test.XXXXXX.log)
cleanup+=("$testlog")
if ! go test -race -count=1 -timeout 25m ./... 2>&1 | tee "$testlog"; then
  die "go test -race: $(failed_tests "$testlog")"
fi

if [ -f "$CONFORMANCE" ]; then
  step "conformance through venn"
  dir=$(mktemp -d /tmp/venn-ci.XXXXXX)
  cleanup+=("$dir")
  bin=$dir/venn
  go build -o "$bin" ./cmd/venn
  cfg=$dir/conformance.yaml
  cat > "$cfg" <<'YAML'
listen: 127.0.0.1:28645
metrics_listen: ""
# The suite calls debug_getRaw* and debug_trace*, which venn blocks by default.
methods: {enable: ["debug_getRaw*", "debug_trace*"]}
chains:
  - name: conformance
    chain_id: 3503995874084926
    remotes:
      - name: geth
        url: http://127.0.0.1:28545
YAML
  # One fixture (eth_simulateV1 ...-but-now-with-fit) simulates 121 blocks
  # and costs geth about 2.3 s of CPU, as much through venn as directly (venn
  # sends it once and adds under 0.1 s of its own): with run.sh's --cache=64
  # geth's block cache keeps none of the blocks its storage reads decompress
  # (with --cache=256 the call costs 0.05 s). On a loaded machine geth then
  # needs more than the replay's 5 s for it, directly as through venn.
  # A failed replay is run once more against a fresh geth and venn; both
  # results are printed.
  if CACHE=$CACHE GETH=$GETH bash "$CONFORMANCE" all http://127.0.0.1:28645/conformance -- "$bin" serve --config "$cfg"; then
    conformance="same result as geth directly"
  else
    echo "conformance: first replay differed from geth's result; replaying once more" >&2
    CACHE=$CACHE GETH=$GETH bash "$CONFORMANCE" all http://127.0.0.1:28645/conformance -- "$bin" serve --config "$cfg" ||
      die "conformance: venn's replay differed from geth's result twice (see the diff above)"
    conformance="same result as geth directly (on the second replay)"
  fi
fi
