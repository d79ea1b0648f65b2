package remotes

import (
	"github.com/venn-gateway/venn/remotes/fielderr"
	"github.com/venn-gateway/venn/remotes/settings"
)

// Tier orders remotes: primary first, then secondary; fallback only when
// nothing else can serve (settings.Tier).
type Tier = settings.Tier

// The tiers, as settings names them.
const (
	TierPrimary   = settings.TierPrimary
	TierSecondary = settings.TierSecondary
	TierFallback  = settings.TierFallback
)

// Config is one upstream endpoint, as config.yaml's chains[].remotes[]
// writes it (settings.Config: its defaults and checks).
type Config = settings.Config

// problems is remotes/fielderr's list in the spelling the pool's checks
// were written in.
type problems struct{ fielderr.List }

func (p *problems) add(field, format string, args ...any) { p.Add(field, format, args...) }
func (p *problems) negative(field string, bad bool)       { p.Negative(field, bad) }
func (p *problems) under(prefix string, err error)        { p.Under(prefix, err) }
func (p *problems) err() error                            { return p.Err() }
