package edge

// Budget is a tenant's credits: how many it may spend per minute and per
// calendar month (UTC), across every replica. Zero: no budget of that
// period.
type Budget struct {
	PerMinute int64 `yaml:"per_minute"`
	PerMonth  int64 `yaml:"per_month"`
}

// Limited reports whether b limits anything.
func (b Budget) Limited() bool { return b.PerMinute > 0 || b.PerMonth > 0 }

func (b Budget) validate(p *problems, path string) {
	if b.PerMinute < 0 {
		p.add(path+".per_minute", "must be >= 0")
	}
	if b.PerMonth < 0 {
		p.add(path+".per_month", "must be >= 0")
	}
}
