package consensus

import (
	"fmt"
	"slices"
	"strings"

	"github.com/venn-gateway/venn/evm"
	"github.com/venn-gateway/venn/remotes/fielderr"
)

// DisputePolicy says what a vote without quorum answers.
type DisputePolicy uint8

const (
	// DisputeError answers -32058 (jrpc.CodeRemotesDisagree).
	DisputeError DisputePolicy = iota
	// DisputeMostCommon answers with the answer most remotes gave; a tie
	// goes to data over null, then to the answer of the best tier, and is
	// otherwise an error.
	DisputeMostCommon
	// DisputePreferTier answers with the answer most remotes of the trusted
	// tier (or better) gave, with the same tie rules; without a trusted
	// answer it is an error.
	DisputePreferTier
)

func (d DisputePolicy) String() string {
	switch d {
	case DisputeError:
		return "error"
	case DisputeMostCommon:
		return "most_common"
	case DisputePreferTier:
		return "prefer_tier"
	}
	return "unknown"
}

// ParseDisputePolicy reads a policy as written in config; "" is error.
func ParseDisputePolicy(s string) (DisputePolicy, error) {
	switch s {
	case "", "error":
		return DisputeError, nil
	case "most_common":
		return DisputeMostCommon, nil
	case "prefer_tier":
		return DisputePreferTier, nil
	}
	return 0, fmt.Errorf("unknown dispute policy %q (want error, most_common or prefer_tier)", s)
}

// MarshalText writes the policy as config names it.
func (d DisputePolicy) MarshalText() ([]byte, error) {
	if d > DisputePreferTier {
		return nil, fmt.Errorf("unknown dispute policy %d", d)
	}
	return []byte(d.String()), nil
}

// UnmarshalText reads a policy as config names it (ParseDisputePolicy).
func (d *DisputePolicy) UnmarshalText(b []byte) error {
	v, err := ParseDisputePolicy(string(b))
	if err == nil {
		*d = v
	}
	return err
}

// DefaultRemotes is how many remotes a rule asks when it does not say (or
// the chain's remote count, if smaller).
const DefaultRemotes = 3

// Tier is the pool's tier type: lower is better.
type Tier interface{ ~uint8 }

// Rule puts the calls of Methods to a vote.
type Rule[T Tier] struct {
	// Methods are exact method names (no prefixes: the name is a metric
	// label). Writes and stateful methods cannot be voted on.
	Methods []string `yaml:"methods"`
	// Remotes are asked at once (N); 0 is min(3, the chain's remotes).
	Remotes int `yaml:"remotes"`
	// Agree is how many must give the same answer (K); 0 is a majority of
	// Remotes. It must be a majority, or two answers could both win.
	Agree int `yaml:"agree"`
	// IgnoreFields are left out of the comparison. A plain name ("size")
	// is dropped at any depth; a dotted path ("transactions.v") is followed
	// from the result's root, through arrays as if they were not there,
	// and "*" matches any key. The answer returned is one agreeing
	// remote's, ignored fields as that remote sent them.
	IgnoreFields []string      `yaml:"ignore_fields"`
	OnDispute    DisputePolicy `yaml:"on_dispute"`
	// TrustedTier: for DisputePreferTier, remotes of this tier or a better
	// one are trusted (primary trusts only primary).
	TrustedTier T `yaml:"trusted_tier"`
}

// Compiled is a Rule with defaults applied and its ignore list compiled.
type Compiled[T Tier] struct {
	Rule[T]
	Ignore *Ignore // nil: compare everything
}

// Compile checks the rules against the chain's remote count (tiers up to
// worst) and indexes them by method. Errors name the rule by index.
func Compile[T Tier](rules []Rule[T], nRemotes int, worst T) (map[string]*Compiled[T], error) {
	if len(rules) == 0 {
		return nil, nil
	}
	rules = Defaults(rules, nRemotes)
	if err := Validate(rules, nRemotes, worst); err != nil {
		return nil, err
	}
	out := make(map[string]*Compiled[T])
	for i, r := range rules {
		ig, err := CompileIgnore(r.IgnoreFields)
		if err != nil {
			return nil, fmt.Errorf("consensus[%d]: %w", i, err)
		}
		cr := &Compiled[T]{Rule: r, Ignore: ig}
		for _, m := range r.Methods {
			out[m] = cr
		}
	}
	return out, nil
}

// Defaults returns rules with their zero fields filled for a chain of
// nRemotes: Remotes min(DefaultRemotes, nRemotes), Agree a majority of
// them. rules is not changed.
func Defaults[T Tier](rules []Rule[T], nRemotes int) []Rule[T] {
	out := slices.Clone(rules)
	for i := range out {
		r := &out[i]
		if r.Remotes == 0 {
			r.Remotes = min(DefaultRemotes, nRemotes)
		}
		if r.Agree == 0 {
			r.Agree = r.Remotes/2 + 1
		}
	}
	return out
}

// Validate reports every problem of a chain's defaulted vote rules, each
// naming its field (consensus[1].agree); worst is the worst tier.
func Validate[T Tier](rules []Rule[T], nRemotes int, worst T) error {
	var p fielderr.List
	add := p.Add
	voted := map[string]int{}
	for k, r := range rules {
		path := fmt.Sprintf("consensus[%d]", k)
		if len(r.Methods) == 0 {
			add(path+".methods", "at least one method is required")
		}
		for m, name := range r.Methods {
			mpath := fmt.Sprintf("%s.methods[%d]", path, m)
			if err := Votable(name); err != nil {
				add(mpath, "%v", err)
			} else if first, dup := voted[name]; dup {
				add(mpath, "%s is already voted on by consensus[%d]", name, first)
			} else {
				voted[name] = k
			}
		}
		switch {
		case r.Remotes < 2:
			add(path+".remotes", "must be at least 2")
		case r.Remotes > nRemotes:
			add(path+".remotes", "is %d, but the chain has %d remote(s)", r.Remotes, nRemotes)
		}
		if r.Agree <= r.Remotes/2 || r.Agree > r.Remotes {
			add(path+".agree", "must be a majority of remotes (%d): %d to %d", r.Remotes, r.Remotes/2+1, max(r.Remotes, 1))
		}
		for f, field := range r.IgnoreFields {
			if slices.Contains(strings.Split(field, "."), "") || strings.ContainsAny(field, " \t\r\n") {
				add(fmt.Sprintf("%s.ignore_fields[%d]", path, f), "must be a field name or a dotted path, not %q", field)
			}
		}
		if r.OnDispute > DisputePreferTier {
			add(path+".on_dispute", "unknown dispute policy %d", r.OnDispute)
		}
		if r.TrustedTier > worst {
			add(path+".trusted_tier", "unknown tier %d", r.TrustedTier)
		}
	}
	return p.Err()
}

// Votable reports why method cannot be put to a vote, or nil: it must be
// an exact name, and neither a write nor stateful.
func Votable(method string) error {
	switch {
	case method == "" || strings.ContainsAny(method, "* \t"):
		return fmt.Errorf("%q is not an exact method name", method)
	case method == "eth_sendRawTransaction" || evm.IsWrite(method):
		return fmt.Errorf("%s is a write: it is never sent to several remotes to compare", method)
	case evm.IsStateful(method):
		return fmt.Errorf("%s is stateful: its answer belongs to one remote", method)
	}
	return nil
}
