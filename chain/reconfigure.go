package chain

import (
	"fmt"
	"reflect"
)

// A chain's identity is its name and chain id: while they stay, a reload
// keeps the chain's head feed (leadership, the head window, history) and
// its WebSocket clients, and applies its sections below. A chain whose
// identity changed is removed and added again.

// section is one part of a chain's configuration as a reload sees
// it: the Config fields it covers (every field is some section's:
// TestSectionsCoverConfig), and how to apply a change, applied as a
// unit. Without apply, a change takes a restart: it is compared with what
// the chain was built with and named in restart_required.
//
// A new section of Config joins by adding itself here.
type section struct {
	name   string   // as the file spells it, in the report
	fields []string // Config's Go field names
	apply  func(c *Chain, cc Config) (changes []string, err error)
}

var sections = []section{
	{name: "name, chain_id", fields: []string{"Name", "ChainID"}}, // identity: never changed in place
	{name: "remotes and pool settings", fields: []string{"Pool", "Remotes"}, apply: applyPool},
	{name: "head", fields: []string{"Head"}},           // the head window and stalker are built with it
	{name: "history", fields: []string{"History"}},     // the archiver is built with it
	{name: "integrity", fields: []string{"Integrity"}}, // the router is built in front of it
	{name: "cache", fields: []string{"Cache"}, apply: applyCache},
	{name: "getlogs_limits", fields: []string{"GetLogsLimits"}, apply: applyLogLimits},
	{name: "filters", fields: []string{"Filters"}, apply: applyFilters},
	{name: "static_answers", fields: []string{"StaticAnswers"}, apply: applyStatic},
	{name: "nats", fields: []string{"NATS"}}, // the feed's publisher is built with it
	{name: "grpc_id", fields: []string{"GRPCID"}, apply: applyGRPCID},
}

// applyGRPCID: the gRPC API reads the chain's config at every call.
func applyGRPCID(c *Chain, cc Config) ([]string, error) {
	return []string{fmt.Sprintf("chain %s: grpc_id %d applied", c.name, cc.GRPCID)}, nil
}

// applyStatic puts a chain's static answers in force on its router.
func applyStatic(c *Chain, cc Config) ([]string, error) {
	c.router.SetStaticAnswers(cc.StaticAnswers)
	return []string{fmt.Sprintf("chain %s: static_answers applied", c.name)}, nil
}

// applyFilters puts a chain's filter timeout and caps in force.
func applyFilters(c *Chain, cc Config) ([]string, error) {
	c.head.filters.SetConfig(cc.Filters)
	return []string{fmt.Sprintf("chain %s: filters applied", c.name)}, nil
}

// applyLogLimits puts a chain's eth_getLogs caps in force on its router.
func applyLogLimits(c *Chain, cc Config) ([]string, error) {
	c.router.SetLogLimits(cc.GetLogsLimits)
	return []string{fmt.Sprintf("chain %s: getlogs_limits applied", c.name)}, nil
}

// same reports whether a and b agree on the section's fields.
func (s section) same(a, b Config) bool {
	va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
	for _, f := range s.fields {
		if !reflect.DeepEqual(va.FieldByName(f).Interface(), vb.FieldByName(f).Interface()) {
			return false
		}
	}
	return true
}

// applyPool applies the remotes and the pool settings in one step
// (remotes.Pool.Reconfigure), and max_lag to the router.
func applyPool(c *Chain, cc Config) ([]string, error) {
	// The pool keeps its reply budget and misbehaviour_log (opened at
	// start; Reconfigure names it).
	rec, err := c.pool.Reconfigure(cc.PoolConfig(), cc.Remotes)
	if err != nil {
		return nil, err
	}
	c.router.SetMaxLag(cc.Pool.MaxLag)
	var out []string
	for _, n := range rec.Added {
		out = append(out, fmt.Sprintf("chain %s: remote %s added", c.name, n))
	}
	for _, n := range rec.Replaced {
		out = append(out, fmt.Sprintf("chain %s: remote %s changed (replaced: its health starts afresh)", c.name, n))
	}
	for _, n := range rec.Removed {
		out = append(out, fmt.Sprintf("chain %s: remote %s removed (its calls in flight finish on it)", c.name, n))
	}
	if rec.Settings {
		out = append(out, fmt.Sprintf("chain %s: pool settings applied", c.name))
	}
	return out, nil
}

// Reconfigured is what a Reconfigure did: the changes applied, the
// fields whose change takes a restart (named after path, as the file
// spells them), and the sections that failed to apply.
type Reconfigured struct {
	Changes  []string
	Restart  []string
	Problems []string
}

// Reconfigure applies the sections of cc that changed to the running
// chain, which keeps its identity (name and chain id) and so its head
// feed and clients; path names the chain in the file ("chains[2]").
func (c *Chain) Reconfigure(cc Config, path string) Reconfigured {
	var rep Reconfigured
	for _, s := range sections {
		if s.apply == nil {
			if !s.same(c.built, cc) {
				rep.Restart = append(rep.Restart, path+" "+s.name)
			}
			continue
		}
		if s.same(c.cfg, cc) {
			continue
		}
		changes, err := s.apply(c, cc)
		if err != nil {
			rep.Problems = append(rep.Problems, err.Error())
			continue
		}
		rep.Changes = append(rep.Changes, changes...)
		for _, f := range s.fields { // what is now in force
			reflect.ValueOf(&c.cfg).Elem().FieldByName(f).Set(reflect.ValueOf(cc).FieldByName(f))
		}
	}
	if cc.Pool.MisbehaviourLog != c.built.Pool.MisbehaviourLog {
		rep.Restart = append(rep.Restart, path+".misbehaviour_log")
	}
	return rep
}
