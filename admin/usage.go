package admin

import (
	"bytes"
	"context"
	"net/http"
	"time"

	"github.com/venn-gateway/venn/usage"
)

// UsageReader reads tenants' usage rows (package usage, in Postgres).
type UsageReader func(ctx context.Context, tenant string, from, to time.Time) ([]usage.Row, error)

// maxUsageDays bounds one usage query: a year and a day.
const maxUsageDays = 367

// getUsage serves GET /admin/usage?tenant=T&from=YYYY-MM-DD&to=YYYY-MM-DD&format=csv|json:
// the usage rows of tenant (every tenant without one), from and to
// included (default: today), as CSV (the default) or JSON.
func (a *Admin) getUsage(w http.ResponseWriter, r *http.Request) {
	if a.opts.Usage == nil {
		writeError(w, http.StatusNotImplemented, "usage is kept in Postgres: set postgres.url")
		return
	}
	q := r.URL.Query()
	today := time.Now().UTC().Truncate(24 * time.Hour)
	from, to := today, today
	var err error
	if s := q.Get("from"); s != "" {
		if from, err = usage.ParseDay(s); err != nil {
			writeError(w, http.StatusBadRequest, "from: "+err.Error())
			return
		}
	}
	if s := q.Get("to"); s != "" {
		if to, err = usage.ParseDay(s); err != nil {
			writeError(w, http.StatusBadRequest, "to: "+err.Error())
			return
		}
	}
	if to.Before(from) || to.Sub(from) > maxUsageDays*24*time.Hour {
		writeError(w, http.StatusBadRequest, "from and to must be in order, at most a year apart")
		return
	}
	format := q.Get("format")
	if format == "" {
		format = usage.FormatCSV
	}
	if format != usage.FormatCSV && format != usage.FormatJSON {
		writeError(w, http.StatusBadRequest, "format must be csv or json")
		return
	}
	rows, err := a.opts.Usage(r.Context(), q.Get("tenant"), from, to)
	if err != nil {
		a.log.Warn("admin: read usage", "err", err)
		writeError(w, http.StatusServiceUnavailable, "usage could not be read from Postgres")
		return
	}
	var buf bytes.Buffer
	_ = usage.Write(&buf, rows, format)
	if format == usage.FormatCSV {
		w.Header().Set("Content-Type", "text/csv; charset=utf-8")
	} else {
		w.Header().Set("Content-Type", "application/json")
	}
	_, _ = w.Write(buf.Bytes())
}
