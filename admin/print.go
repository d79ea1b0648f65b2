package admin

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"text/tabwriter"
	"time"
)

// maxOverviewBytes bounds what Fetch reads of an answer.
const maxOverviewBytes = 16 << 20

// Fetch reads GET /admin/status from the admin API at base (http://host:port)
// with token ("" none).
func Fetch(ctx context.Context, c *http.Client, base, token string) (Overview, error) {
	var o Overview
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(base, "/")+"/admin/status", nil)
	if err != nil {
		return o, fmt.Errorf("admin url: %w", err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.Do(req)
	if err != nil {
		return o, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxOverviewBytes))
	if err != nil {
		return o, fmt.Errorf("read answer: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Error string `json:"error"`
		}
		_ = json.Unmarshal(body, &e)
		return o, fmt.Errorf("admin API: %s: %s", resp.Status, e.Error)
	}
	if err := json.Unmarshal(body, &o); err != nil {
		return o, fmt.Errorf("admin API answer: %w", err)
	}
	return o, nil
}

// Print writes the overview for a terminal: the replica, the cluster's
// replicas, then each chain and a table of its remotes.
func Print(w io.Writer, o Overview, now time.Time) error {
	file := o.ConfigFile
	if file == "" {
		file = "built-in default"
	}
	fmt.Fprintf(w, "venn %s · replica %s · config %s · up %s", o.Version, o.Replica, file, ago(now, o.Started))
	if o.Draining {
		fmt.Fprint(w, " · DRAINING")
	}
	fmt.Fprintln(w)
	rs := make([]string, 0, len(o.Replicas))
	for _, r := range o.Replicas {
		s := r.Replica + " (" + r.Version
		if r.Self {
			s += ", this one"
		} else {
			s += ", seen " + ago(now, r.LastSeen) + " ago"
		}
		if len(r.Leads) > 0 {
			s += ", leads " + strings.Join(r.Leads, " ")
		}
		rs = append(rs, s+")")
	}
	fmt.Fprintf(w, "replicas: %s\n", strings.Join(rs, " · "))
	for _, c := range o.Chains {
		fmt.Fprintln(w)
		if err := printChain(w, c); err != nil {
			return err
		}
	}
	return nil
}

func printChain(w io.Writer, c ChainView) error {
	ready := "ready"
	if !c.Ready {
		ready = "NOT READY"
	}
	fmt.Fprintf(w, "%s  %s  %s  head %d (%.1fs old)  safe %d  finalized %d\n",
		c.Name, c.Path, ready, c.Head, c.HeadAgeSeconds, c.Safe, c.Finalized)
	leader := "no leader"
	if c.Leader != nil {
		leader = fmt.Sprintf("leader %s epoch %d", c.Leader.Replica, c.Leader.Epoch)
	}
	settled := "-"
	if c.Settled != nil {
		settled = fmt.Sprint(*c.Settled)
	}
	fmt.Fprintf(w, "  %s · window %d..%d (%d blocks) · settled %s · subscribers %d · history %s · remotes %d in, %d out\n",
		leader, c.Window.From, c.Window.To, c.Window.Blocks, settled, c.Subscribers, c.History, c.InRotation, c.Out)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  REMOTE\tTIER\tSTATE\tHEAD\tLAG\tP50 ms\tP90 ms\tERR%\tTHR%\tSCORE\tIN FLIGHT\tWHY / LAST ERROR")
	for _, r := range c.Remotes {
		state, why := "in", ""
		if !r.InRotation {
			state = "out"
			texts := make([]string, len(r.Out))
			for i, o := range r.Out {
				texts[i] = o.Text
			}
			why = strings.Join(texts, "; ")
		}
		if r.CordonHeld {
			why = strings.TrimPrefix(why+"; ", "; ") + "cordon held back (last remote in rotation)"
		}
		if r.LastError != "" {
			why = strings.TrimPrefix(why+"; ", "; ") + "last error: " + r.LastError
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%d\t%d\t%.1f\t%.1f\t%.1f\t%.1f\t%.3g\t%d\t%s\n", r.Name, r.Tier, state, r.Head, r.Lag,
			r.P50MS, r.P90MS, 100*r.Terms.ErrorShare, 100*r.Terms.ThrottleShare, r.Score, r.InFlight, why)
	}
	return tw.Flush()
}

// ago is how long before now t was, to the second.
func ago(now, t time.Time) string {
	if t.IsZero() {
		return "?"
	}
	return max(now.Sub(t), 0).Round(time.Second).String()
}
