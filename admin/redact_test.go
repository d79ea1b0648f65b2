package admin

import (
	"encoding/json"
	"strings"
	"testing"
)

// The config is shown by the rule logs, errors and status share: a
// public host stays (it says which provider), a private one, user info,
// paths and queries go.
func TestRedactShowsPublicHostsOnly(t *testing.T) {
	type remote struct {
		URL     string            `yaml:"url"`
		WSURL   string            `yaml:"ws_url"`
		Headers map[string]string `yaml:"headers"`
	}
	cfg := struct {
		Remotes  []remote `yaml:"remotes"`
		Endpoint string   `yaml:"endpoint"`
	}{
		Remotes: []remote{
			{URL: "https://eth-mainnet.g.alchemy.com/v2/KEY0123456789abcdef", WSURL: "wss://eth-mainnet.g.alchemy.com/v2/KEY0123456789abcdef",
				Headers: map[string]string{"Authorization": "Bearer TOKEN0123456789"}},
			{URL: "http://10.1.2.3:8545"},
			{URL: "http://user:PASS0123456789@geth.internal:8545"},
		},
		Endpoint: "https://otel.example.io:4318/v1/traces?token=OTELSECRET",
	}
	v, err := Redact(cfg)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(v)
	got := string(b)
	for _, want := range []string{
		`"url":"https://eth-mainnet.g.alchemy.com/[redacted]"`,
		`"ws_url":"wss://eth-mainnet.g.alchemy.com/[redacted]"`,
		`"url":"http://[redacted]:8545"`,
		`"url":"http://[redacted]:8545/[redacted]"`,
		`"endpoint":"https://otel.example.io:4318/[redacted]"`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("redacted config lacks %s: %s", want, got)
		}
	}
	for _, secret := range []string{"KEY0123", "TOKEN0123", "10.1.2.3", "PASS0123", "geth.internal", "OTELSECRET"} {
		if strings.Contains(got, secret) {
			t.Errorf("redacted config shows %s: %s", secret, got)
		}
	}
}
