package jrpc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"testing"
)

func TestToWire(t *testing.T) {
	upstream := &Error{Code: 3, Message: "execution reverted", Data: json.RawMessage(`"0x"`)}
	tests := []struct {
		name string
		give error
		want *Error
	}{
		{name: "nil", give: nil, want: nil},
		{name: "upstream error as is", give: upstream, want: upstream},
		{name: "wrapped upstream error as is", give: fmt.Errorf("remote a: %w", upstream), want: upstream},
		{name: "standard code forwarded", give: &Error{Code: CodeInvalidParams, Message: "bad"},
			want: &Error{Code: CodeInvalidParams, Message: "bad"}},
		{name: "venn code", give: vennError{CodeNoRemote, "no remote"},
			want: &Error{Code: CodeNoRemote, Message: "no remote"}},
		{name: "wrapped venn code keeps its own message", give: fmt.Errorf("route: %w", vennError{CodeRateLimited, "slow down"}),
			want: &Error{Code: CodeRateLimited, Message: "slow down"}},
		{name: "venn code with data", give: fmt.Errorf("route: %w", dataError{vennError{CodeNoRemote, "no remote"}, `{"remotes":[]}`}),
			want: &Error{Code: CodeNoRemote, Message: "no remote", Data: json.RawMessage(`{"remotes":[]}`)}},
		{name: "method not found, as a node says it", give: vennError{CodeMethodNotFound, "the method x does not exist/is not available"},
			want: &Error{Code: CodeMethodNotFound, Message: "the method x does not exist/is not available"}},
		{name: "invalid params, as a node says it", give: fmt.Errorf("subscribe: %w", vennError{CodeInvalidParams, "missing value for required argument 1"}),
			want: &Error{Code: CodeInvalidParams, Message: "missing value for required argument 1"}},
		{name: "internal, in the error's own words", give: vennError{CodeInternal, "filters unavailable; try again"},
			want: &Error{Code: CodeInternal, Message: "filters unavailable; try again"}},
		{name: "transport's standard code", give: vennError{CodeInvalidRequest, "x"}, want: &Error{Code: CodeInternal, Message: "internal error"}},
		{name: "parse error code", give: vennError{CodeParseError, "x"}, want: &Error{Code: CodeInternal, Message: "internal error"}},
		{name: "range low end", give: vennError{-32099, "x"}, want: &Error{Code: -32099, Message: "x"}},
		{name: "range high end", give: vennError{-32000, "x"}, want: &Error{Code: -32000, Message: "x"}},
		{name: "code below range", give: vennError{-32100, "x"}, want: &Error{Code: CodeInternal, Message: "internal error"}},
		{name: "code above range", give: vennError{-31999, "x"}, want: &Error{Code: CodeInternal, Message: "internal error"}},
		{name: "deadline", give: fmt.Errorf("call: %w", context.DeadlineExceeded),
			want: &Error{Code: CodeTimeout, Message: "request timed out"}},
		{name: "unknown error hides detail", give: errors.New("dial https://key@host: refused"),
			want: &Error{Code: CodeInternal, Message: "internal error"}},
		{name: "canceled is internal", give: context.Canceled, want: &Error{Code: CodeInternal, Message: "internal error"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ToWire(tt.give)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("ToWire(%v) = %+v, want %+v", tt.give, got, tt.want)
			}
		})
	}
}
