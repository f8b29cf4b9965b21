package main

import (
	"fmt"
	"io"

	"github.com/highwater-dev/highwater/manifest"
)

// addReports copies the reports of a reconcile or a reset into l.
func (l *statusLine) addReports(c *manifest.Commit) {
	l.Reconcile, l.Reset = c.Reconcile, c.Reset
	if c.Reset != nil {
		l.Reason = &c.Reset.Reason
	}
}

// reconcileNotes says, below the table, when each model was last proven
// equal to its source, what its last reconcile found when it differed,
// and every reset with its reason.
func reconcileNotes(w io.Writer, lines []statusLine) error {
	type last struct {
		equal, latest *statusLine
	}
	byGroup := map[string]*last{}
	var order []string
	for i := range lines {
		l := &lines[i]
		if r := l.Reset; r != nil {
			if _, err := fmt.Fprintf(w, "note: %s: seq %d reset the watermark from %s to %s: %q (by %s on %s)\n",
				l.group, l.Seq, deref(r.OldWatermark), r.NewWatermark, r.Reason, r.User, r.Host); err != nil {
				return err
			}
		}
		if l.Reconcile == nil {
			continue
		}
		g := byGroup[l.group]
		if g == nil {
			g = &last{}
			byGroup[l.group] = g
			order = append(order, l.group)
		}
		g.latest = l
		if l.Reconcile.Equal() {
			g.equal = l
		}
	}
	for _, group := range order {
		g := byGroup[group]
		var err error
		switch {
		case g.equal != nil && g.equal == g.latest:
			_, err = fmt.Fprintf(w, "note: %s: last proven equal to the source at %s (seq %d, %d keys)\n", group, g.equal.Committed, g.equal.Seq, g.equal.Reconcile.Matched)
		default:
			r := g.latest.Reconcile
			repaired := ""
			if r.Repaired {
				repaired = ", repaired"
			}
			since := "never proven equal"
			if g.equal != nil {
				since = fmt.Sprintf("last proven equal at %s (seq %d)", g.equal.Committed, g.equal.Seq)
			}
			_, err = fmt.Fprintf(w, "note: %s: the reconcile at seq %d found %d missing, %d extra, %d changed keys%s; %s\n",
				group, g.latest.Seq, r.Missing, r.Extra, r.Changed, repaired, since)
		}
		if err != nil {
			return err
		}
	}
	return nil
}
