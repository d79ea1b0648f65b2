package nats

import (
	"strings"
	"testing"
)

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		give Config
		want []string // substrings of the problems, in order; none: valid
	}{
		{name: "off", give: Config{}},
		{name: "one server", give: Config{URL: "nats://127.0.0.1:4222"}},
		{name: "a list, host:port and tls", give: Config{URL: "nats://a:4222, b:4222,tls://c:4443"}},
		{name: "a dotted prefix", give: Config{URL: "nats://a:4222", Prefix: "acme.venn"}},
		{name: "token", give: Config{URL: "nats://a:4222", Token: "t"}},
		{name: "credentials", give: Config{URL: "nats://a:4222", CredentialsFile: "/x.creds"}},
		{
			name: "fields without url",
			give: Config{Token: "secret"},
			want: []string{"url: required when any other nats field is set"},
		},
		{
			name: "bad scheme, no secret quoted",
			give: Config{URL: "http://user:hunter2@a:4222"},
			want: []string{`url: server 1 of the list: scheme must be nats, tls, ws or wss, not "http"`},
		},
		{
			name: "an empty server in the list",
			give: Config{URL: "nats://a:4222,"},
			want: []string{"url: server 2 of the list: empty"},
		},
		{
			name: "wildcard prefix",
			give: Config{URL: "nats://a:4222", Prefix: "venn.>"},
			want: []string{"prefix: \"venn.>\" holds a wildcard"},
		},
		{
			name: "empty token in prefix",
			give: Config{URL: "nats://a:4222", Prefix: "venn..x"},
			want: []string{"prefix: \"venn..x\" has an empty token"},
		},
		{
			name: "two ways to authenticate",
			give: Config{URL: "nats://a:4222", User: "u", Password: "p", Token: "t"},
			want: []string{"user: set one of user and password, token, credentials_file or nkey_file"},
		},
		{
			name: "password without user",
			give: Config{URL: "nats://a:4222", Password: "p"},
			want: []string{"user: required with password"},
		},
		{
			name: "cert without key",
			give: Config{URL: "nats://a:4222", TLS: TLSConfig{CertFile: "c.pem"}},
			want: []string{"tls: cert_file and key_file go together"},
		},
		{
			name: "negative durations",
			give: Config{URL: "nats://a:4222", ReconnectWait: -1, ReconnectJitter: -1},
			want: []string{"reconnect_wait: must be positive", "reconnect_jitter: must not be negative"},
		},
		{
			name: "max in flight",
			give: Config{URL: "nats://a:4222", RPC: RPCConfig{MaxInFlight: -1}},
			want: []string{"rpc.max_in_flight: must be at least 1"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.give.WithDefaults().Validate()
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate() = nil, want %q", tt.want)
			}
			got := strings.Split(err.Error(), "\n")
			if len(got) != len(tt.want) {
				t.Fatalf("Validate() = %q, want %d problems %q", got, len(tt.want), tt.want)
			}
			for i, w := range tt.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("problem %d = %q, want it to hold %q", i, got[i], w)
				}
			}
			if strings.Contains(err.Error(), "hunter2") || strings.Contains(err.Error(), "secret") {
				t.Errorf("a problem quotes a secret: %v", err)
			}
		})
	}
}

func TestConfigDefaultsAndSubjects(t *testing.T) {
	c := Config{URL: "nats://a:4222"}.WithDefaults()
	if c.Prefix != "venn" || c.RPCSubject("eth") != "venn.eth.rpc" || c.QueueGroup() != "venn" {
		t.Fatalf("prefix %q subject %q queue %q", c.Prefix, c.RPCSubject("eth"), c.QueueGroup())
	}
	if !c.RPC.On() || c.RPC.MaxInFlight != DefaultMaxInFlight || c.PingInterval != DefaultPingInterval {
		t.Fatalf("defaults not applied: %+v", c)
	}
	if off := (Config{}).WithDefaults(); off.Prefix != "" || off.Enabled() {
		t.Fatalf("a section without url got defaults: %+v", off)
	}
}
