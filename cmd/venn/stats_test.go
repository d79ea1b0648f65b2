package main

import (
	"regexp"
	"strings"
	"testing"

	"github.com/venn-gateway/venn/internal/fakenode"
	"github.com/venn-gateway/venn/internal/pgtest"
)

// venn history stats prints each chain's stored history: the configured
// chain by name with its blocks, ranges, and rows of every table, right
// after the backfill (Postgres has estimated nothing yet) as after an
// ANALYZE; an empty store says so.
func TestHistoryStats(t *testing.T) {
	url := pgtest.Empty(t)
	node := fakenode.Start(t, fakenode.Options{ChainID: testChainID, Head: 200})
	cfg := historyConfig(t, url, node)
	if out, _ := runCode(t, exitOK, "history", "stats", "--config", cfg); !strings.Contains(out, "no history stored") {
		t.Errorf("stats of an empty store: %q", out)
	}
	runCode(t, exitOK, "backfill", "--config", cfg, "--chain", "test", "--from", "0", "--to", "50")
	runCode(t, exitOK, "backfill", "--config", cfg, "--chain", "test", "--from", "80", "--to", "120")
	for _, analyzed := range []bool{false, true} {
		if analyzed {
			pgtest.Exec(t, url, "ANALYZE")
		}
		out, _ := runCode(t, exitOK, "history", "stats", "--config", cfg)
		for _, want := range []*regexp.Regexp{
			// 92 blocks in two ranges, two partitions (0..99,999 and the next).
			regexp.MustCompile(`test +1337 +2 +92 +0\.\.120 \(2\) +blocks +92 +\d+ +\d+`),
			regexp.MustCompile(`\n +transactions +182 +\d+ +\d+`), // genesis has none
			regexp.MustCompile(`\n +logs +182 +\d+ +\d+`),
			regexp.MustCompile(`\n +all +\d+ +\d+`),
		} {
			if !want.MatchString(out) {
				t.Errorf("analyzed %v: stdout does not match %s:\n%s", analyzed, want, out)
			}
		}
	}
	if _, errOut := runCode(t, exitUsage, "history", "stats"); !strings.Contains(errOut, "--config is required") {
		t.Errorf("stats without --config: %q", errOut)
	}
}
