package app

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/venn-gateway/venn/jrpc"
	"github.com/venn-gateway/venn/remotes"
	"github.com/venn-gateway/venn/remotes/settings"
	"github.com/venn-gateway/venn/subcenter"
)

// minimal is the smallest useful file: one chain, one remote.
const minimal = `
chains:
  - name: ethereum
    chain_id: 1
    remotes:
      - name: a
        url: http://127.0.0.1:18545
`

func mustParse(t *testing.T, src string) *Config {
	t.Helper()
	c, err := Parse([]byte(src))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return c
}

func TestParseAppliesDefaults(t *testing.T) {
	c := mustParse(t, minimal)

	if c.Listen != DefaultListen || c.MetricsAddr() != DefaultMetricsListen {
		t.Errorf("listen = %q, metrics = %q", c.Listen, c.MetricsAddr())
	}
	if c.Log != (LogConfig{Level: "info", Format: "text"}) {
		t.Errorf("log = %+v", c.Log)
	}
	if c.ShutdownTimeout != DefaultShutdownTimeout {
		t.Errorf("shutdown_timeout = %v", c.ShutdownTimeout)
	}
	if got, want := c.Limits, (Limits{jrpc.DefaultLimits(), subcenter.DefaultLimits()}); got != want {
		t.Errorf("limits = %+v, want %+v", got, want)
	}
	wantPool := remotes.PoolConfig{
		Chain:               "ethereum",
		ChainID:             1,
		BlockTime:           0, // learned from block timestamps
		ChainRecheck:        remotes.DefaultChainRecheck,
		MaxLag:              remotes.DefaultMaxLag,
		CallDeadline:        remotes.DefaultCallDeadline,
		MaxAttempts:         remotes.DefaultMaxAttempts,
		GetLogsConcurrency:  remotes.DefaultGetLogsConcurrency,
		GetLogsMaxParts:     remotes.DefaultGetLogsMaxParts,
		BroadcastFanout:     remotes.DefaultBroadcastFanout,
		PendingPollInterval: remotes.DefaultPendingPollInterval,
		Breaker:             remotes.BreakerConfig{Failures: remotes.DefaultBreakerFailures, Cooldown: remotes.DefaultBreakerCooldown},
		Cordon:              defaultPoolCordon(),
		Hedge:               defaultPoolHedge(),
		Scoring:             defaultPoolScoring(),
		Availability:        remotes.AvailabilityConfig{ProbeEvery: remotes.DefaultProbeEvery},
	}
	if got := c.Chains[0].PoolConfig(); !reflect.DeepEqual(got, wantPool) {
		t.Errorf("pool = %+v\nwant %+v", got, wantPool)
	}
	rc := c.Chains[0].Remotes[0]
	wantRemote := remotes.Config{
		Name:        "a",
		URL:         "http://127.0.0.1:18545",
		Tier:        remotes.TierPrimary,
		Timeout:     settings.DefaultRemoteTimeout,
		MaxInFlight: settings.DefaultMaxInFlight,
	}
	if !reflect.DeepEqual(rc, wantRemote) {
		t.Errorf("remote = %+v\nwant %+v", rc, wantRemote)
	}
}

func TestParseFullFile(t *testing.T) {
	c := mustParse(t, `
listen: 0.0.0.0:8545
metrics_listen: ""
log: {level: debug, format: json}
limits:
  max_body_bytes: 1024
  max_batch_items: 10
  batch_concurrency: 2
  max_ws_message_bytes: 2048
  max_connections: 5
  max_connections_per_ip: 4
  max_subscriptions_per_connection: 8
  subscription_queue: 100
  subscription_queue_bytes: 65536
  max_filter_addresses: 10
  max_filter_topics: 11
  max_filter_bytes_per_connection: 4096
  max_reply_bytes_in_flight: 536870912
  ws_in_flight: 3
  ws_ping_interval: 5s
  ws_write_timeout: 2s
  max_http_in_flight: 9
  http_read_timeout: 4s
  http_write_timeout: 6s
shutdown_timeout: 1m
shutdown_delay: 5s
chains:
  - name: base_sepolia-2
    chain_id: 84532
    block_time: 2s
    chain_recheck: 30s
    max_lag: 10
    call_deadline: 5s
    max_attempts: 2
    getlogs_concurrency: 8
    getlogs_max_parts: 50
    broadcast_fanout: 1
    pending_poll_interval: 500ms
    breaker: {failures: 3, cooldown: 1s}
    remotes:
      - name: Provider.A_1
        url: wss://example.com/v1
        ws_url: wss://example.com/ws
        tier: secondary
        timeout: 3s
        max_in_flight: 7
        rate_limit: {rps: 2.5}
        methods: {allow: [eth_, net_version], deny: ["debug_*"]}
        headers: {Authorization: "Bearer x"}
        max_logs_range: 2000
        max_response_bytes: 1048576
`)
	if c.MetricsAddr() != "" {
		t.Errorf(`metrics_listen: "" must disable, got %q`, c.MetricsAddr())
	}
	wantLimits := Limits{jrpc.Limits{
		MaxBodyBytes: 1024, MaxBatchItems: 10, BatchConcurrency: 2, MaxWSMessageBytes: 2048,
		MaxConnections: 5, MaxConnsPerIP: 4,
		WSInFlight: 3, WSPingInterval: 5 * time.Second, WSWriteTimeout: 2 * time.Second,
		MaxHTTPInFlight: 9, HTTPReadTimeout: 4 * time.Second, HTTPWriteTimeout: 6 * time.Second,
		MaxReplyBytesInFlight: 512 << 20,
	}, subcenter.Limits{MaxSubscriptions: 8, SubscriptionQueue: 100, SubscriptionQueueBytes: 65536,
		MaxFilterAddresses: 10, MaxFilterTopics: 11, MaxFilterBytes: 4096}}
	if got := c.Limits; got != wantLimits {
		t.Errorf("limits = %+v", got)
	}
	if c.ShutdownTimeout != time.Minute || c.ShutdownDelay != 5*time.Second || c.Log.Format != "json" {
		t.Errorf("shutdown_timeout = %v, shutdown_delay = %v, log = %+v", c.ShutdownTimeout, c.ShutdownDelay, c.Log)
	}
	wantPool := remotes.PoolConfig{
		Chain: "base_sepolia-2", ChainID: 84532, BlockTime: 2 * time.Second, ChainRecheck: 30 * time.Second, MaxLag: 10,
		CallDeadline: 5 * time.Second, MaxAttempts: 2, GetLogsConcurrency: 8, GetLogsMaxParts: 50, BroadcastFanout: 1,
		PendingPollInterval: 500 * time.Millisecond, Breaker: remotes.BreakerConfig{Failures: 3, Cooldown: time.Second},
		Cordon: defaultPoolCordon(),
		Hedge:  defaultPoolHedge(), Scoring: defaultPoolScoring(),
		Availability: remotes.AvailabilityConfig{ProbeEvery: remotes.DefaultProbeEvery},
	}
	if got := c.Chains[0].PoolConfig(); !reflect.DeepEqual(got, wantPool) {
		t.Errorf("pool = %+v", got)
	}
	rc := c.Chains[0].Remotes[0]
	wantRemote := remotes.Config{
		Name: "Provider.A_1", URL: "wss://example.com/v1", WSURL: "wss://example.com/ws",
		Tier: remotes.TierSecondary, Timeout: 3 * time.Second, MaxInFlight: 7,
		RateLimit:    settings.RateLimit{RPS: 2.5, Burst: 3}, // ceil(rps)
		Methods:      settings.MethodFilter{Allow: []string{"eth_", "net_version"}, Deny: []string{"debug_*"}},
		Headers:      map[string]string{"Authorization": "Bearer x"},
		MaxLogsRange: 2000, MaxResponseBytes: 1 << 20,
	}
	if !reflect.DeepEqual(rc, wantRemote) {
		t.Errorf("remote = %+v\nwant %+v", rc, wantRemote)
	}
}

func TestRateLimitBurstDefault(t *testing.T) {
	tests := []struct {
		give string
		want int
	}{
		{give: "{rps: 0}", want: 0},
		{give: "{rps: 0.2}", want: 1},
		{give: "{rps: 10}", want: 10},
		{give: "{rps: 10.1}", want: 11},
		{give: "{rps: 10, burst: 4}", want: 4},
	}
	for _, tt := range tests {
		t.Run(tt.give, func(t *testing.T) {
			c := mustParse(t, minimal+"        rate_limit: "+tt.give+"\n")
			if got := c.Chains[0].Remotes[0].RateLimit.Burst; got != tt.want {
				t.Errorf("burst = %d, want %d", got, tt.want)
			}
		})
	}
}

// TestValidateNamesField checks that every problem names its field path and
// that all problems are reported at once.
func TestValidateNamesField(t *testing.T) {
	tests := []struct {
		name string
		give string
		want []string
	}{
		{
			name: "no chains",
			give: `listen: 127.0.0.1:1`,
			want: []string{"chains: at least one chain is required"},
		},
		{
			name: "top level",
			give: `
listen: nonsense
metrics_listen: "also-nonsense"
log: {level: loud, format: xml}
shutdown_timeout: -1s
limits: {max_body_bytes: -1, ws_ping_interval: -1s, max_reply_bytes_in_flight: -1}
` + minimal[1:],
			want: []string{
				`listen: must be host:port`,
				`metrics_listen: must be host:port`,
				`log.level (line 4): must be debug, info, warn or error`,
				`log.format (line 4): must be text or json`,
				`shutdown_timeout: must be positive`,
				`limits.max_body_bytes: must be positive`,
				`limits.ws_ping_interval: must be positive`,
				`limits.max_reply_bytes_in_flight: must be positive`,
			},
		},
		{
			name: "grpc heartbeat too often",
			give: "grpc: {heartbeat: 10ms}\n" + minimal[1:],
			want: []string{"grpc.heartbeat: 10ms is under 100ms (0: the default)"},
		},
		{
			name: "grpc status recheck negative",
			give: "grpc: {status_recheck: -1s}\n" + minimal[1:],
			want: []string{"grpc.status_recheck: must not be negative"},
		},
		{
			name: "metrics on the rpc address",
			give: "listen: 127.0.0.1:1\nmetrics_listen: 127.0.0.1:1\n" + minimal[1:],
			want: []string{"metrics_listen: must differ from listen"},
		},
		{
			name: "chain fields",
			give: `
chains:
  - name: Ethereum
    max_attempts: -1
    getlogs_concurrency: -2
    getlogs_max_parts: 1000000
    broadcast_fanout: -3
    block_time: -1s
    chain_recheck: 10ms
    call_deadline: -1s
    pending_poll_interval: -1s
    breaker: {failures: -1, cooldown: -1s}
  - name: b
    chain_id: 2
    chain_recheck: -1s
    pending_poll_interval: 2m
    availability: {probe_every: 10s}
  - name: b
    chain_id: 3
    remotes: [{name: x, url: "http://127.0.0.1:1"}]
  - name: short
    chain_id: 5
    call_deadline: 4s
    remotes:
      - name: slow
        url: http://127.0.0.1:1
        timeout: 4s
      - name: defaulted
        url: http://127.0.0.1:2
        archive: true
        max_block_lookback: 128
`,
			want: []string{
				`chains[0].name: must match [a-z0-9_-]+`,
				`chains[0].chain_id: required`,
				`chains[0].max_attempts: must be positive`,
				`chains[0].getlogs_concurrency: must be positive`,
				`chains[0].getlogs_max_parts: must be at most 100000`,
				`chains[0].broadcast_fanout: must be positive`,
				`chains[0].block_time: must be positive`,
				`chains[0].chain_recheck: must be at least 100ms`,
				`chains[1].chain_recheck: must be positive`,
				`chains[0].call_deadline: must be positive`,
				`chains[0].pending_poll_interval: must be positive`,
				`chains[1].pending_poll_interval: must be at most 1m0s, not 2m0s`,
				`chains[1].availability.probe_every: must be at least 1m0s`,
				`chains[3].remotes[0].timeout: must be shorter than the chain's call_deadline (4s)`,
				`chains[3].remotes[1].max_block_lookback: must not be set with archive: true (an archive serves every block)`,
				`chains[0].breaker.failures: must be positive`,
				`chains[0].breaker.cooldown: must be positive`,
				`chains[0].remotes: at least one remote is required`,
				`chains[1].remotes: at least one remote is required`,
				`chains[2].name: "b" is already used by chains[1]`,
			},
		},
		{
			name: "remote fields",
			give: `
chains:
  - name: eth
    chain_id: 1
    remotes:
      - name: "bad name"
        url: ftp://127.0.0.1/
        ws_url: http://127.0.0.1/
        tier: gold
        timeout: -1s
        max_in_flight: -1
        rate_limit: {rps: -1, burst: -1}
        methods: {allow: [""], deny: ["eth call"]}
        headers: {"Bad Header": "x", "X-Key": "a\nb"}
      - name: ok
      - name: ok
        url: http://
`,
			want: []string{
				`chains[0].remotes[0].name: must match [A-Za-z0-9_.-]+`,
				`chains[0].remotes[0].url: must be http(s):// or ws(s)://`,
				`chains[0].remotes[0].ws_url: must be ws(s)://`,
				`chains[0].remotes[0].tier (line 9): unknown tier "gold"`,
				`chains[0].remotes[0].timeout: must be positive`,
				`chains[0].remotes[0].max_in_flight: must be positive`,
				`chains[0].remotes[0].rate_limit.rps: must be a finite number >= 0`,
				`chains[0].remotes[0].rate_limit.burst: must be >= 0`,
				`chains[0].remotes[0].methods.allow[0]: must be a method name or prefix`,
				`chains[0].remotes[0].methods.deny[0]: must be a method name or prefix`,
				`chains[0].remotes[0].headers: "Bad Header" is not a valid header name`,
				`chains[0].remotes[0].headers.X-Key: value must not contain CR, LF or NUL`,
				`chains[0].remotes[1].url: required`,
				`chains[0].remotes[2].name: "ok" is already used by remotes[1]`,
				`chains[0].remotes[2].url: must be http(s):// or ws(s):// (no host)`,
			},
		},
		{
			name: "remote cap over the reply budget",
			give: `
limits: {max_reply_bytes_in_flight: 1048576}
chains:
  - name: eth
    chain_id: 1
    remotes:
      - name: big
        url: http://127.0.0.1:1
        max_response_bytes: 2097152
      - name: defaulted
        url: http://127.0.0.1:2
`,
			want: []string{"chains[0].remotes[0].max_response_bytes: must not exceed limits.max_reply_bytes_in_flight (1048576)"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.give))
			if err == nil {
				t.Fatal("Parse succeeded, want errors")
			}
			lines := strings.Split(err.Error(), "\n")
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("missing %q in\n%v", w, err)
				}
			}
			if len(lines) != len(tt.want) {
				t.Errorf("got %d problems, want %d:\n%v", len(lines), len(tt.want), err)
			}
		})
	}
}

func TestUnknownFieldRejected(t *testing.T) {
	tests := []struct {
		give string
		want string
	}{
		{give: "listen_addr: x\n" + minimal, want: "field listen_addr not found in the top level"},
		{give: minimal + "        urll: http://x\n", want: "field urll not found in a remote"},
		{give: minimal + "    maxlag: 1\n", want: "field maxlag not found in a chain"},
		{give: "limits: {max_body: 1}\n" + minimal, want: "field max_body not found in limits"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			_, err := Parse([]byte(tt.give))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want it to contain %q", err, tt.want)
			}
		})
	}
}

func TestEnvExpansion(t *testing.T) {
	t.Setenv("VENN_TEST_KEY", "s3cret")
	t.Setenv("VENN_TEST_EMPTY", "")
	tests := []struct {
		name string
		give string
		want string // the remote's url after expansion
	}{
		{name: "set", give: "http://h/${VENN_TEST_KEY}", want: "http://h/s3cret"},
		{name: "default unused", give: "http://h/${VENN_TEST_KEY:-d}", want: "http://h/s3cret"},
		{name: "default when unset", give: "http://h/${VENN_TEST_UNSET:-d}", want: "http://h/d"},
		{name: "default when empty", give: "http://h/${VENN_TEST_EMPTY:-d}", want: "http://h/d"},
		{name: "empty default", give: "http://h/${VENN_TEST_UNSET:-}x", want: "http://h/x"},
		{name: "set but empty", give: "http://h/${VENN_TEST_EMPTY}x", want: "http://h/x"},
		{name: "bare dollar kept", give: "http://h/$VENN_TEST_KEY$", want: "http://h/$VENN_TEST_KEY$"},
		{name: "escaped", give: "http://h/$${VENN_TEST_KEY}", want: "http://h/${VENN_TEST_KEY}"},
		{name: "two", give: "http://${VENN_TEST_KEY}/${VENN_TEST_KEY}", want: "http://s3cret/s3cret"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := "# a comment naming ${VENN_TEST_UNSET} is left alone\n" +
				strings.Replace(minimal, "http://127.0.0.1:18545", `"`+tt.give+`"`, 1)
			c := mustParse(t, src)
			if got := c.Chains[0].Remotes[0].URL; got != tt.want {
				t.Errorf("url = %q, want %q", got, tt.want)
			}
		})
	}
}

// List items are values too: they are expanded like mapping values, in
// block style and (quoted) in flow style.
func TestEnvExpansionInLists(t *testing.T) {
	t.Setenv("VENN_TEST_M", "eth_call")
	t.Setenv("VENN_TEST_KEY", "s3cret")
	tests := []struct {
		name      string
		give      string // the remote's methods and headers
		wantAllow []string
		wantDeny  []string
	}{
		{
			name:      "block list",
			give:      "methods:\n          allow:\n            - ${VENN_TEST_M}\n            - net_${VENN_TEST_UNSET:-version}",
			wantAllow: []string{"eth_call", "net_version"},
		},
		{
			name:      "flow list, quoted",
			give:      `methods: {allow: ["${VENN_TEST_M}"], deny: ['debug_${VENN_TEST_UNSET:-*}']}`,
			wantAllow: []string{"eth_call"},
			wantDeny:  []string{"debug_*"},
		},
		{
			name:      "flow map, quoted",
			give:      `headers: {X-Key: "${VENN_TEST_KEY}"}`,
			wantAllow: nil,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := mustParse(t, minimal+"        "+tt.give+"\n")
			r := c.Chains[0].Remotes[0]
			if !reflect.DeepEqual(r.Methods.Allow, tt.wantAllow) || !reflect.DeepEqual(r.Methods.Deny, tt.wantDeny) {
				t.Errorf("methods = %+v, want allow %q deny %q", r.Methods, tt.wantAllow, tt.wantDeny)
			}
			if strings.HasPrefix(tt.give, "headers") && r.Headers["X-Key"] != "s3cret" {
				t.Errorf("headers = %q, want X-Key expanded", r.Headers)
			}
		})
	}
}

// A variable's value stays one value whatever it holds, and a plain value
// takes the type of what it expanded to.
func TestEnvValuesStayValues(t *testing.T) {
	t.Setenv("VENN_TEST_ODD", "*k #ey: \"x' [y")
	t.Setenv("VENN_TEST_ID", "137")
	src := `
# a comment naming ${VENN_TEST_UNSET} is left alone
chains:
  - name: polygon
    chain_id: ${VENN_TEST_ID}
    remotes:
      - name: a
        url: http://127.0.0.1:18545
        headers:
          X-Key: ${VENN_TEST_ODD}
`
	c := mustParse(t, src)
	if c.Chains[0].ChainID != 137 {
		t.Errorf("chain_id = %d, want 137", c.Chains[0].ChainID)
	}
	if got := c.Chains[0].Remotes[0].Headers["X-Key"]; got != os.Getenv("VENN_TEST_ODD") {
		t.Errorf("header = %q, want the variable verbatim", got)
	}
}

// A value of the wrong type names its field, and validation still reports
// the other problems.
func TestTypeErrorsNameField(t *testing.T) {
	src := `
listen: nonsense
chains:
  - name: ethereum
    chain_id: one
    remotes:
      - name: a
        url: http://127.0.0.1:18545
        timeout: soon
`
	_, err := Parse([]byte(src))
	if err == nil {
		t.Fatal("Parse succeeded")
	}
	for _, want := range []string{"chains[0].chain_id (line 5)", "chains[0].remotes[0].timeout (line 9)", "listen: must be host:port"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("err = %v\nwant it to contain %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "chain_id: required") {
		t.Errorf("a field with a type error is also reported missing: %v", err)
	}
}

func TestEnvExpansionErrors(t *testing.T) {
	tests := []struct {
		name string
		give string
		want []string
	}{
		{
			name: "unset",
			give: "listen: ${VENN_TEST_UNSET_A}\nmetrics_listen: ${VENN_TEST_UNSET_B}\n",
			want: []string{
				"listen (line 1): environment variable VENN_TEST_UNSET_A is not set",
				"metrics_listen (line 2): environment variable VENN_TEST_UNSET_B is not set",
			},
		},
		{name: "unclosed", give: "listen: ${VENN_TEST", want: []string{"listen (line 1): unclosed ${"}},
		{name: "bad name", give: "listen: ${1X}", want: []string{`listen (line 1): bad variable name "1X"`}},
		{
			name: "unset in a list",
			give: minimal + "        methods:\n          allow:\n            - eth_call\n            - ${VENN_TEST_UNSET_C}\n",
			want: []string{"chains[0].remotes[0].methods.allow[1] (line 11): environment variable VENN_TEST_UNSET_C is not set"},
		},
		{
			name: "unset in a quoted flow list",
			give: minimal + `        methods: {deny: ["${VENN_TEST_UNSET_D}"]}` + "\n",
			want: []string{"chains[0].remotes[0].methods.deny[0] (line 8): environment variable VENN_TEST_UNSET_D is not set"},
		},
		{
			// YAML ends a plain value at "}" inside { }: say what to do.
			name: "unquoted in a flow map",
			give: minimal + "        headers: {X-Key: ${VENN_TEST_KEY}}\n",
			want: []string{"config: yaml: ", `(line 8: quote values that use ${...} inside { } or [ ]`},
		},
		{
			name: "unquoted in a flow list",
			give: minimal + "        methods: {allow: [${VENN_TEST_M}]}\n",
			want: []string{"config: yaml: ", `(line 8: quote values that use ${...} inside { } or [ ]`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.give))
			if err == nil {
				t.Fatal("Parse succeeded")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("err = %v, want it to contain %q", err, w)
				}
			}
		})
	}
}

// The hint on a syntax error names the line with an unquoted ${ inside
// { } or [ ], not one where it is quoted or outside flow style.
func TestFlowEnvLine(t *testing.T) {
	tests := []struct {
		name string
		give string
		want int
	}{
		{name: "block value", give: "a: ${X}\nb: [1, 2]", want: 0},
		{name: "flow map", give: "a: 1\nb: {c: ${X}}", want: 2},
		{name: "flow list", give: "a: [x, ${X}]", want: 1},
		{name: "quoted in flow", give: "a: {b: \"${X}\", c: '${Y}'}\nd: [${Z}]", want: 2},
		{name: "escaped quote", give: `a: {b: "x\"${X}", c: ${Y}}`, want: 1},
		{name: "across lines", give: "a: {\n  b: ${X}\n}", want: 2},
		{name: "bracket inside a block value", give: "url: http://h/[x]/${X}", want: 0},
		{name: "comment", give: "a: 1 # {b: ${X}}", want: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := flowEnvLine([]byte(tt.give)); got != tt.want {
				t.Errorf("flowEnvLine(%q) = %d, want %d", tt.give, got, tt.want)
			}
		})
	}
}

// TestErrorsNeverShowURL feeds URLs carrying a key through every path that
// can fail and checks the key never reaches a message.
func TestErrorsNeverShowURL(t *testing.T) {
	const key = "KEY0123456789abcdef"
	t.Setenv("VENN_TEST_SECRET", key)
	tests := []struct {
		name string
		give string
	}{
		{name: "bad scheme", give: `url: "ftp://` + key + `@h/` + key + `"`},
		{name: "scheme-looking key", give: `url: "` + key + `:1/x"`},
		{name: "no scheme", give: `url: "h.example/` + key + `"`},
		{name: "unparseable", give: `url: "http://h/%zz` + key + `"`},
		{name: "bad host", give: `url: "http://[` + key + `/"`},
		{name: "ws_url http", give: "url: http://h\n        ws_url: http://h/${VENN_TEST_SECRET}"},
		{name: "url in a number field", give: "url: http://h\n        max_in_flight: http://h/${VENN_TEST_SECRET}"},
		{name: "url in a duration field", give: "url: http://h\n        timeout: https://" + key},
		{name: "secret in a number field", give: "url: http://h\n        max_in_flight: ${VENN_TEST_SECRET}"},
		{name: "secret as a whole map", give: "url: http://h\n        headers: ${VENN_TEST_SECRET}"},
		{name: "bad header value", give: "url: http://h\n        headers: {Authorization: \"Bearer ${VENN_TEST_SECRET}\\r\\n\"}"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := "chains:\n  - name: eth\n    chain_id: 1\n    remotes:\n      - name: provider-a\n        " + tt.give + "\n"
			_, err := Parse([]byte(src))
			if err == nil {
				t.Fatal("Parse succeeded")
			}
			for _, part := range []string{key, key[:7], key[len(key)-7:]} {
				if strings.Contains(err.Error(), part) {
					t.Errorf("error shows the key: %v", err)
				}
			}
		})
	}
}

func TestLoad(t *testing.T) {
	t.Run("embedded default", func(t *testing.T) {
		c, err := Load("")
		if err != nil {
			t.Fatal(err)
		}
		if len(c.Chains) != 1 || c.Chains[0].Name != "ethereum" || c.Chains[0].ChainID != 1 {
			t.Fatalf("chains = %+v", c.Chains)
		}
		if c.Listen != "127.0.0.1:8545" || c.MetricsAddr() != "127.0.0.1:9545" {
			t.Errorf("listen = %q, metrics = %q", c.Listen, c.MetricsAddr())
		}
		tiers := map[string]int{}
		for _, r := range c.Chains[0].Remotes {
			tiers[r.Tier.String()]++
		}
		if tiers["fallback"] == 0 || tiers["primary"] == 0 {
			t.Errorf("tiers = %v, want primaries and a fallback", tiers)
		}
	})
	t.Run("file", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "venn.yaml")
		if err := os.WriteFile(path, []byte(minimal), 0o600); err != nil {
			t.Fatal(err)
		}
		c, err := Load(path)
		if err != nil {
			t.Fatal(err)
		}
		if c.RemoteCount() != 1 {
			t.Errorf("remotes = %d", c.RemoteCount())
		}
	})
	t.Run("example file", func(t *testing.T) {
		c, err := Load("../config.example.yaml")
		if err != nil {
			t.Fatal(err)
		}
		if len(c.Chains) != 1 || c.RemoteCount() != 3 {
			t.Errorf("chains = %d, remotes = %d", len(c.Chains), c.RemoteCount())
		}
	})
	t.Run("missing file", func(t *testing.T) {
		_, err := Load(filepath.Join(t.TempDir(), "nope.yaml"))
		if err == nil || !strings.Contains(err.Error(), "nope.yaml") {
			t.Errorf("err = %v, want it to name the file", err)
		}
	})
	t.Run("empty file", func(t *testing.T) {
		_, err := Parse(nil)
		if err == nil || !strings.Contains(err.Error(), "chains: at least one chain is required") {
			t.Errorf("err = %v", err)
		}
	})
}

// A list item of the wrong type names its index, and is not reported a
// second time as a missing list.
func TestTypeErrorInListItem(t *testing.T) {
	_, err := Parse([]byte("chains:\n  - name: ethereum\n    chain_id: 1\n    remotes:\n      - oops\n"))
	if err == nil || !strings.Contains(err.Error(), "chains[0].remotes[0] (line 5)") {
		t.Fatalf("err = %v, want it to name chains[0].remotes[0] (line 5)", err)
	}
	if strings.Contains(err.Error(), "at least one remote is required") {
		t.Errorf("the bad item is reported twice: %v", err)
	}
}

// A remote's default timeout fits the chain's call deadline twice, so a
// short deadline needs no timeout of its own.
func TestRemoteTimeoutDefaultFitsDeadline(t *testing.T) {
	c := mustParse(t, strings.Replace(minimal, "    chain_id: 1\n", "    chain_id: 1\n    call_deadline: 4s\n", 1))
	if got := c.Chains[0].Remotes[0].Timeout; got != 2*time.Second {
		t.Fatalf("timeout = %v, want 2s (half of call_deadline 4s)", got)
	}
}
