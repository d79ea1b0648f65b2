package jrpc

import (
	"encoding/json"
	"testing"
)

func TestAppendString(t *testing.T) {
	tests := []struct {
		give string
		want string
	}{
		{give: "", want: `""`},
		{give: "plain", want: `"plain"`},
		{give: `q"b\`, want: `"q\"b\\"`},
		{give: "\n\r\t\x00\x1f", want: `"\n\r\t\u0000\u001f"`},
		{give: "é✓", want: `"é✓"`},
		{give: "bad\xffutf8", want: `"bad\ufffdutf8"`},
		{give: "\u2028\u2029", want: `"\u2028\u2029"`},
		{give: "<&>", want: `"<&>"`},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			got := AppendString(nil, tt.give)
			if string(got) != tt.want {
				t.Errorf("AppendString(%q) = %s, want %s", tt.give, got, tt.want)
			}
			var back string
			if err := json.Unmarshal(got, &back); err != nil {
				t.Fatalf("not valid JSON: %v", err)
			}
		})
	}
}

func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"", "a", "\"\\", "\x00\x7f\xff", "\u2028", "é"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := AppendString(nil, s)
		var back string
		if err := json.Unmarshal(got, &back); err != nil {
			t.Fatalf("AppendString(%q) = %s: %v", s, got, err)
		}
		// Same value encoding/json gives (it also maps bad UTF-8 to U+FFFD).
		want, _ := json.Marshal(s)
		var wantBack string
		_ = json.Unmarshal(want, &wantBack)
		if back != wantBack {
			t.Fatalf("AppendString(%q) decodes to %q, encoding/json to %q", s, back, wantBack)
		}
	})
}

func TestAppendErrorDropsInvalidData(t *testing.T) {
	got := appendError(nil, []byte(`1`), &Error{Code: 1, Message: "m", Data: json.RawMessage(`{bad`)})
	if want := `{"jsonrpc":"2.0","id":1,"error":{"code":1,"message":"m"}}`; string(got) != want {
		t.Errorf("got %s, want %s", got, want)
	}
}

func TestAppendNotification(t *testing.T) {
	tests := []struct {
		method string
		params string
		want   string
	}{
		{method: "eth_subscription", params: `{"a":1}`, want: `{"jsonrpc":"2.0","method":"eth_subscription","params":{"a":1}}`},
		{method: "m", want: `{"jsonrpc":"2.0","method":"m"}`},
	}
	for _, tt := range tests {
		if got := appendNotification(nil, tt.method, []byte(tt.params)); string(got) != tt.want {
			t.Errorf("got %s, want %s", got, tt.want)
		}
	}
}
