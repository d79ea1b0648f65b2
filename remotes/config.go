package remotes

import (
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
