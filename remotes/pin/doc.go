// Package pin is the table of filters made upstream: a filter lives on
// one remote (the id eth_newFilter returns means nothing to the others),
// so the pool remembers which remote made each, and sends every later
// call on the filter back to it. It owns the table's bound and the
// filters' idle lifetime; it must not touch the pool or a remote: it
// keeps whatever the pool calls a remote, and sends nothing.
package pin
