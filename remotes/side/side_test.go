package side

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
)

func TestSameJSON(t *testing.T) {
	tests := []struct {
		a, b string
		want bool
	}{
		{`{"a":1,"b":[2,3]}`, `{"a":1,"b":[2,3]}`, true},
		{`{"a":1,"b":[2,3]}`, `{ "b": [2, 3], "a": 1 }`, true},
		{`{"a":1}`, `{"a":1.0}`, false}, // numbers as written: 1 and 1.0 differ
		{`"0x1"`, `"0x01"`, false},
		{`null`, `nul`, false},
	}
	for _, tt := range tests {
		if got := sameJSON(json.RawMessage(tt.a), json.RawMessage(tt.b)); got != tt.want {
			t.Errorf("sameJSON(%s, %s) = %v, want %v", tt.a, tt.b, got, tt.want)
		}
	}
}

// A route that lists tenants takes only their calls: a caller it does
// not list (here, one without a tenant) goes by the route for everyone,
// or by none. (Routes by tenant through the edge: remotes'
// TestTenantRoute.)
func TestRouteByTenant(t *testing.T) {
	sd := New(Config{Routes: []TxRoute{
		{Methods: []string{"eth_sendRawTransaction"}, Group: "public-relays"},
		{Methods: []string{"eth_sendRawTransaction", "eth_sendBundle"}, Group: "protect", Tenants: []string{"team-a"}},
	}})
	defer sd.Close()
	tests := []struct {
		method string
		want   string // the group; "" for none
	}{
		{"eth_sendRawTransaction", "public-relays"},
		{"eth_sendBundle", ""},
		{"eth_call", ""},
	}
	for _, tt := range tests {
		got := ""
		if rt := sd.route(context.Background(), tt.method); rt != nil {
			got = rt.Group
		}
		if got != tt.want {
			t.Errorf("route(%s) = %q, want %q", tt.method, got, tt.want)
		}
	}
	if list := sd.routes["eth_sendRawTransaction"]; len(list) != 2 || list[0].Group != "protect" {
		t.Errorf("routes of eth_sendRawTransaction: want the tenant's first")
	}
}

func TestCheckRoutes(t *testing.T) {
	errs := CheckRoutes([]TxRoute{
		{Group: "nope"},
		{Methods: []string{"m"}, Group: "g"},
		{Methods: []string{"m", " x"}, Group: "g"},
		{Methods: []string{"m"}, Group: "g", Tenants: []string{"t"}},
	}, map[string]bool{"g": true})
	var got []string
	for _, e := range errs {
		got = append(got, e.Error())
	}
	want := []string{
		`transaction_routes[0].group: "nope": no remote of the chain is in this group`,
		"transaction_routes[0].methods: at least one method is required",
		"transaction_routes[2].methods[0]: m is routed by transaction_routes[1] too",
		`transaction_routes[2].methods[1]: must be a method name, not " x"`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("CheckRoutes:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
