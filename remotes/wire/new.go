package wire

// New returns the HTTP or WebSocket transport for opts.URL. It does
// no I/O: a WebSocket transport dials on its first call.
func New(opts Options) (Transport, error) {
	u, err := opts.normalize()
	if err != nil {
		return nil, err
	}
	switch u.Scheme {
	case "http", "https":
		return newHTTPTransport(opts, u), nil
	default:
		return newWSTransport(opts, u), nil
	}
}
