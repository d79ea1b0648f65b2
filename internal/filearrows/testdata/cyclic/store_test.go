package cyclic

// Test files are left out: this arrow to report.go must not count.
var _ = Report
