package remotes

import (
	"context"
	"encoding/json"
	"strconv"

	"github.com/venn-gateway/venn/evm"
)

// pinned is the pinned strategy of the filter methods: creation goes to
// one remote (not retried once sent), and every later call on that filter
// goes back to it (remotes/pin remembers which).
func (p *Pool) pinned(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
	switch method {
	case "eth_newFilter", "eth_newBlockFilter", "eth_newPendingTransactionFilter":
		r, _ := p.pick(method, route{}, 0)
		if r == nil {
			return nil, p.exhausted(ctx, method, 0, nil)
		}
		res, err := p.send(ctx, method, params, route{once: true, only: r})
		if err == nil {
			if id, uerr := strconv.Unquote(string(res)); uerr == nil {
				p.filters.Put(id, r, p.now())
			}
		}
		return res, err
	case "eth_getFilterChanges", "eth_getFilterLogs", "eth_uninstallFilter":
		var id string
		if err := json.Unmarshal(evm.Param(params, 0), &id); err == nil {
			if r, ok := p.filters.Get(id, p.now()); ok {
				res, err := p.send(ctx, method, params, route{once: true, only: r})
				if err == nil && method == "eth_uninstallFilter" {
					p.filters.Remove(id)
				}
				return res, err
			}
		}
	}
	return p.send(ctx, method, params, route{once: true})
}
