package app

import (
	"reflect"
	"strings"
	"testing"
)

func TestRedisTarget(t *testing.T) {
	tests := []struct {
		name string
		give string // the redis section, YAML
		want redisTarget
	}{
		{name: "sentinel URL", give: `url: "redis+sentinel://:SECRET@10.0.0.1:26379,10.0.0.2:26379/2?master=main"`,
			want: redisTarget{kind: redisSentinel, addrs: []string{"10.0.0.1:26379", "10.0.0.2:26379"}, master: "main", db: 2, password: "SECRET"}},
		{name: "sentinel URL, TLS and the sentinels' password", give: `url: "rediss+sentinel://u:p@s1:26379?master=m&sentinel_password=SP"`,
			want: redisTarget{kind: redisSentinel, addrs: []string{"s1:26379"}, master: "m", username: "u", password: "p", sentinelPassword: "SP", tls: true}},
		{name: "sentinel block", give: "sentinel: {master: main, addrs: [\"s1:26379\", \"s2:26379\"]}\n  password: PW",
			want: redisTarget{kind: redisSentinel, addrs: []string{"s1:26379", "s2:26379"}, master: "main", password: "PW"}},
		{name: "sentinel block, TLS and the sentinels' password", give: "sentinel: {master: main, addrs: [\"s1:26379\"], password: SP}\n  password: PW\n  tls: true",
			want: redisTarget{kind: redisSentinel, addrs: []string{"s1:26379"}, master: "main", password: "PW", sentinelPassword: "SP", tls: true}},
		{name: "cluster block, TLS", give: "cluster: [\"n1:6379\"]\n  username: u\n  password: PW\n  tls: true",
			want: redisTarget{kind: redisCluster, addrs: []string{"n1:6379"}, username: "u", password: "PW", tls: true}},
		{name: "cluster block", give: `cluster: ["n1:6379", "n2:6379", "n3:6379"]`,
			want: redisTarget{kind: redisCluster, addrs: []string{"n1:6379", "n2:6379", "n3:6379"}}},
		{name: "cluster URL", give: `url: "rediss+cluster://:PW@n1:6379,n2:6379"`,
			want: redisTarget{kind: redisCluster, addrs: []string{"n1:6379", "n2:6379"}, password: "PW", tls: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := mustParse(t, "redis:\n  "+tt.give+"\n"+threeRemotes)
			got, err := cfg.Redis.target()
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("target = %+v, want %+v", got, tt.want)
			}
			if !cfg.Redis.Enabled() {
				t.Error("not Enabled")
			}
		})
	}
	t.Run("one server", func(t *testing.T) {
		cfg := mustParse(t, "redis: {url: \"redis://:PW@127.0.0.1:6380/3?dial_timeout=2s\"}\n"+threeRemotes)
		got, err := cfg.Redis.target()
		if err != nil || got.kind != redisServer || got.server.Addr != "127.0.0.1:6380" || got.server.DB != 3 || got.server.Password != "PW" {
			t.Errorf("target = %+v (%+v), %v", got, got.server, err)
		}
	})
}

// A bad redis section fails Parse naming the field, never quoting the
// password.
func TestRedisConfigNamesTheField(t *testing.T) {
	tests := []struct{ give, want string }{
		{`url: "redis+sentinel://:SECRET@s1:26379"`, "redis.url: a redis+sentinel URL needs ?master=NAME"},
		{`url: "redis+sentinel://:SECRET@s1:26379?master=m&mastr=x"`, `redis.url: unknown option "mastr"`},
		{`url: "redis+cluster://:SECRET@n1:6379/1"`, "redis.url: a Redis Cluster has only database 0"},
		{`url: "redis+cluster://:SECRET@n1:6379?master=m"`, "redis.url: master and sentinel_password are for redis+sentinel"},
		{`url: "redis+sentinel://:SECRET@s1?master=m"`, "redis.url: address 1 is not host:port"},
		{`url: "redis+ring://:SECRET@n1:6379"`, "redis.url: must be redis://"},
		{`url: "http://:SECRET@n1:6379"`, "redis.url: must be redis://"},
		{`url: "redis://:SECRET@n1:6379/x"`, "redis.url: must be redis://"},
		{"url: \"redis://:SECRET@n1:6379\"\n  cluster: [\"n1:6379\"]", "redis.url: set it or redis.sentinel or redis.cluster, not both"},
		{"cluster: [\"n1:6379\"]\n  sentinel: {master: m, addrs: [\"s1:26379\"]}", "redis.sentinel and redis.cluster: set one"},
		{`sentinel: {addrs: ["s1:26379"]}`, "redis.sentinel.master: required"},
		{`sentinel: {master: m}`, "redis.sentinel.addrs: at least one host:port is required"},
		{`cluster: ["n1:6379", "n2"]`, "redis.cluster: address 2 is not host:port"},
		{"url: \"redis://n1:6379\"\n  password: SECRET", "redis.username, redis.password: only with redis.sentinel or redis.cluster"},
		{"url: \"redis://:SECRET@n1:6379\"\n  tls: true", "redis.tls: only with redis.sentinel or redis.cluster (a URL says rediss://)"},
		{"cluster: [\"n1:6379\"]\n  sentinel: {password: SECRET}", "redis.sentinel.password: only with redis.sentinel.master and addrs"},
		{"url: \"redis://:SECRET@n1:6379\"\n  sentinel: {password: SECRET}", "redis.sentinel.password: only with redis.sentinel.master and addrs"},
		{"tls: true", "redis.tls: only with redis.sentinel or redis.cluster"},
		{"sentinel: {password: SECRET}", "redis.sentinel.password: only with redis.sentinel.master and addrs"},
	}
	for _, tt := range tests {
		_, err := Parse([]byte("redis:\n  " + tt.give + "\n" + threeRemotes))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want %q", tt.give, err, tt.want)
		}
		if err != nil && strings.Contains(err.Error(), "SECRET") {
			t.Errorf("%s: the error quotes the password: %v", tt.give, err)
		}
	}
}
