package jrpc

import "go.uber.org/fx"

// Module gives an fx app a *Server built from the Options it supplies;
// the app registers each chain's handler on it (Handle) and serves
// Handler() on its own listener, calling Shutdown before closing it.
var Module = fx.Module("jrpc",
	fx.Provide(NewServer),
)
