package jrpc

import (
	"testing"
	"time"
)

func TestLimitsValidate(t *testing.T) {
	tests := []struct {
		name string
		give func(*Limits)
		want string
	}{
		{name: "defaults", give: func(*Limits) {}, want: ""},
		{name: "body", give: func(l *Limits) { l.MaxBodyBytes = 0 }, want: "max_body_bytes: must be positive"},
		{name: "batch", give: func(l *Limits) { l.MaxBatchItems = -1 }, want: "max_batch_items: must be positive"},
		{name: "batch concurrency", give: func(l *Limits) { l.BatchConcurrency = 0 }, want: "batch_concurrency: must be positive"},
		{name: "ws message", give: func(l *Limits) { l.MaxWSMessageBytes = 0 }, want: "max_ws_message_bytes: must be positive"},
		{name: "connections", give: func(l *Limits) { l.MaxConnections = 0 }, want: "max_connections: must be positive"},
		{name: "http in flight", give: func(l *Limits) { l.MaxHTTPInFlight = 0 }, want: "max_http_in_flight: must be positive"},
		{name: "http read timeout", give: func(l *Limits) { l.HTTPReadTimeout = -time.Second }, want: "http_read_timeout: must be positive"},
		{name: "http write timeout", give: func(l *Limits) { l.HTTPWriteTimeout = 0 }, want: "http_write_timeout: must be positive"},
		{name: "in flight", give: func(l *Limits) { l.WSInFlight = 0 }, want: "ws_in_flight: must be positive"},
		{name: "ping", give: func(l *Limits) { l.WSPingInterval = 0 }, want: "ws_ping_interval: must be positive"},
		{name: "write timeout", give: func(l *Limits) { l.WSWriteTimeout = -time.Second }, want: "ws_write_timeout: must be positive"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := DefaultLimits()
			tt.give(&l)
			err := l.Validate()
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tt.want {
				t.Errorf("Validate() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestLimitsWithDefaults(t *testing.T) {
	if got := (Limits{}).withDefaults(); got != DefaultLimits() {
		t.Errorf("zero Limits with defaults = %+v, want %+v", got, DefaultLimits())
	}
	got := Limits{MaxBatchItems: 7}.withDefaults()
	if got.MaxBatchItems != 7 || got.MaxBodyBytes != DefaultMaxBodyBytes {
		t.Errorf("set fields must stay, zero ones default: %+v", got)
	}
	if err := got.Validate(); err != nil {
		t.Errorf("defaults do not validate: %v", err)
	}
	// Config fills only what is unset, so a negative value is still there
	// to be reported, with every other bad one.
	cfg := Limits{MaxConnections: -1, WSPingInterval: -time.Second}.WithZeroDefaults()
	if cfg.MaxBodyBytes != DefaultMaxBodyBytes || cfg.MaxConnections != -1 {
		t.Errorf("WithZeroDefaults = %+v: unset fields default, negative ones stay", cfg)
	}
	if err := cfg.Validate(); err == nil || err.Error() != "max_connections: must be positive\nws_ping_interval: must be positive" {
		t.Errorf("Validate() = %v, want both bad limits", err)
	}
}
