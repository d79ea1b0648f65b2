package blockstore

import (
	"strings"
	"testing"
	"time"
)

// The section's defaults: none without a URL; a read timeout that fits
// the shortest call deadline twice.
func TestConfigDefaults(t *testing.T) {
	tests := []struct {
		name        string
		give        Config
		deadline    time.Duration
		read, write time.Duration
	}{
		{name: "no store", give: Config{}, deadline: time.Second},
		{name: "defaults", give: Config{URL: "postgres://db/venn"}, read: DefaultReadTimeout, write: DefaultWriteTimeout},
		{name: "short deadline", give: Config{URL: "postgres://db/venn"}, deadline: 3 * time.Second,
			read: 1500 * time.Millisecond, write: DefaultWriteTimeout},
		{name: "set", give: Config{URL: "postgres://db/venn", ReadTimeout: 5 * time.Second, WriteTimeout: time.Minute},
			deadline: 3 * time.Second, read: 5 * time.Second, write: time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := tt.give.WithDefaults(tt.deadline)
			if c.ReadTimeout != tt.read || c.WriteTimeout != tt.write {
				t.Errorf("timeouts = %v, %v; want %v, %v", c.ReadTimeout, c.WriteTimeout, tt.read, tt.write)
			}
		})
	}
}

// Validate names its fields and never quotes the URL, which may carry a
// password.
func TestConfigValidate(t *testing.T) {
	const pw = "SECRETPW0123"
	c := Config{URL: "mysql://venn:" + pw + "@db/venn", ReadTimeout: -1, WriteTimeout: -1}
	err := c.Validate()
	want := []string{
		"url: must be postgres://user[:password]@host:port/db",
		"read_timeout: must be positive",
		"write_timeout: must be positive",
	}
	if err == nil {
		t.Fatal("Validate passed")
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("missing %q in\n%v", w, err)
		}
	}
	if strings.Contains(err.Error(), pw) {
		t.Errorf("the message shows the password: %v", err)
	}
	if err := (Config{URL: "postgresql://venn@/venn?host=/run/postgresql"}).WithDefaults(0).Validate(); err != nil {
		t.Errorf("a socket URL: %v", err)
	}
}
