package app

import (
	"strings"
	"testing"
	"time"

	"github.com/venn-gateway/venn/blockstore"
	"github.com/venn-gateway/venn/stalker"
)

func TestHistoryConfig(t *testing.T) {
	tests := []struct {
		name                string
		give                string
		wantURL             string
		wantConf            uint64
		wantBatch           int
		wantRead, wantWrite time.Duration
		wantRequired        bool
	}{
		{name: "no postgres: no history store", give: threeRemotes,
			wantConf: stalker.DefaultConfirmations, wantBatch: stalker.DefaultArchiveBatch},
		{name: "postgres with defaults",
			give:    "postgres: {url: \"postgres://venn:pw@db:5432/venn?sslmode=disable\"}\n" + threeRemotes,
			wantURL: "postgres://venn:pw@db:5432/venn?sslmode=disable", wantConf: 64, wantBatch: 100,
			wantRead: blockstore.DefaultReadTimeout, wantWrite: blockstore.DefaultWriteTimeout},
		{name: "the default read timeout fits a short call deadline twice",
			give: "postgres: {url: \"postgres://db/venn\"}\n" +
				strings.Replace(threeRemotes, "    chain_id: 1\n", "    chain_id: 1\n    call_deadline: 3s\n", 1),
			wantURL: "postgres://db/venn", wantConf: 64, wantBatch: 100,
			wantRead: 1500 * time.Millisecond, wantWrite: blockstore.DefaultWriteTimeout},
		{name: "everything set",
			give: "postgres: {url: \"postgresql://venn@/venn?host=/run/postgresql\", read_timeout: 500ms, write_timeout: 1m, required: true}\n" +
				threeRemotes + "    history: {confirmations: 12, batch: 500}\n",
			wantURL: "postgresql://venn@/venn?host=/run/postgresql", wantConf: 12, wantBatch: 500,
			wantRead: 500 * time.Millisecond, wantWrite: time.Minute, wantRequired: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := mustParse(t, tt.give)
			if cfg.Postgres.URL != tt.wantURL {
				t.Errorf("postgres.url = %q, want %q", cfg.Postgres.URL, tt.wantURL)
			}
			if pc := cfg.Postgres; pc.ReadTimeout != tt.wantRead || pc.WriteTimeout != tt.wantWrite || pc.Required != tt.wantRequired {
				t.Errorf("postgres = read %v, write %v, required %v; want %v, %v, %v",
					pc.ReadTimeout, pc.WriteTimeout, pc.Required, tt.wantRead, tt.wantWrite, tt.wantRequired)
			}
			h := cfg.Chains[0].History
			if h.Confirmations != tt.wantConf || h.Batch != tt.wantBatch {
				t.Errorf("history = %+v, want confirmations %d, batch %d", h, tt.wantConf, tt.wantBatch)
			}
			sc := cfg.Chains[0].StalkerConfig(nil, nil)
			if sc.Archive.Store != nil {
				t.Error("a stalker without a store archives")
			}
		})
	}
}

func TestHistoryConfigNamesField(t *testing.T) {
	tests := []struct {
		name string
		give string
		want []string
	}{
		{name: "not a postgres url", give: "postgres: {url: \"mysql://venn:SECRETPW@db/venn\"}\n" + threeRemotes,
			want: []string{"postgres.url: must be postgres://user[:password]@host:port/db"}},
		{name: "unparsable url", give: "postgres: {url: \"postgres://venn:SECRETPW@db:port/venn\"}\n" + threeRemotes,
			want: []string{"postgres.url: must be postgres://user[:password]@host:port/db"}},
		{name: "timeouts", give: "postgres: {url: \"postgres://db/venn\", read_timeout: -1s, write_timeout: -1s}\n" + threeRemotes,
			want: []string{"postgres.read_timeout: must be positive", "postgres.write_timeout: must be positive"}},
		{name: "a read as long as the call",
			give: "postgres: {url: \"postgres://db/venn\", read_timeout: 5s}\n" +
				strings.Replace(threeRemotes, "    chain_id: 1\n", "    chain_id: 1\n    call_deadline: 5s\n", 1),
			want: []string{"postgres.read_timeout: must be shorter than chains[0].call_deadline (5s)"}},
		{name: "history", give: threeRemotes + "    history: {confirmations: 128, batch: -1}\n",
			want: []string{
				"chains[0].history.batch: must be positive",
				"chains[0].history.confirmations: must be below head.window (128)",
			}},
		{name: "batch too large, confirmations against a small window",
			give: threeRemotes + "    head: {window: 16}\n    history: {confirmations: 16, batch: 20000}\n",
			want: []string{
				"chains[0].history.batch: must be at most 10000",
				"chains[0].history.confirmations: must be below head.window (16)",
			}},
		{name: "partitions too small", give: threeRemotes + "    history: {partition_blocks: 10}\n",
			want: []string{"chains[0].history.partition_blocks: must be at least 1000"}},
		{name: "keeping fewer blocks than the window", give: threeRemotes + "    history: {keep_blocks: 100}\n",
			want: []string{"chains[0].history.keep_blocks: must be 0 (keep all) or at least head.window and confirmations (128)"}},
		{name: "a type error names the field", give: threeRemotes + "    history: {confirmations: many}\n",
			want: []string{"chains[0].history.confirmations (line 9): cannot unmarshal !!str `many` into uint64"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.give))
			if err == nil {
				t.Fatal("Parse succeeded, want errors")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("missing %q in\n%v", w, err)
				}
			}
			if n := len(strings.Split(err.Error(), "\n")); n != len(tt.want) {
				t.Errorf("got %d problems, want %d:\n%v", n, len(tt.want), err)
			}
			if strings.Contains(err.Error(), "SECRETPW") {
				t.Errorf("the message shows the password: %v", err)
			}
		})
	}
}

// TestHistorySharedChainID: two chains may name one chain_id (its history
// is shared) unless both keep it and keep it differently, when each
// leader's retention would drop the other's blocks.
func TestHistorySharedChainID(t *testing.T) {
	const pg = "postgres: {url: \"postgres://db/venn\"}\n"
	second := func(history string) string {
		return "  - name: ethereum-archive\n    chain_id: 1\n    remotes:\n      - {name: d, url: \"http://127.0.0.1:4\"}\n" + history
	}
	const keep = "    history: {keep_blocks: 50000}\n"
	tests := []struct {
		name    string
		give    string
		wantErr string
	}{
		{name: "alike", give: pg + threeRemotes + keep + second(keep)},
		{name: "default partitions spelled out", give: pg + threeRemotes + second("    history: {partition_blocks: 100000}\n")},
		{name: "one keeps no history", give: pg + threeRemotes + keep + second("    history: {off: true}\n")},
		{name: "no history store", give: threeRemotes + keep + second("")},
		{name: "retention differs", give: pg + threeRemotes + keep + second(""),
			wantErr: "chains[1].history: chain_id 1 is also chains[0]'s, whose history keep_blocks or partition_blocks differ"},
		{name: "partitions differ", give: pg + threeRemotes + second("    history: {partition_blocks: 2000}\n"),
			wantErr: "chains[1].history: chain_id 1 is also chains[0]'s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.give))
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("Parse = %v, want no error", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("Parse = %v, want %q", err, tt.wantErr)
			}
		})
	}
}

// TestHistoryPolicy: a chain's keep_blocks and partition_blocks are its
// store's policy (chain's TestHistoryOff: a chain with history off gets
// none).
func TestHistoryPolicy(t *testing.T) {
	cfg := mustParse(t, threeRemotes+"    history: {keep_blocks: 50000, partition_blocks: 2000}\n")
	if got, want := cfg.Chains[0].History.Policy(), (blockstore.Policy{PartitionBlocks: 2000, KeepBlocks: 50000}); got != want {
		t.Errorf("policy %+v, want %+v", got, want)
	}
}
