package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/goredisson/ratelimiter"
	"github.com/goredisson/ratelimiter/wire"
)

func init() {
	adminCommand("inspect", "show config, TTLs, values and every permit record decoded, of each limiter named (read-only)", "[--max-records N] [--output json]", inspectCmd)
}

func table(w io.Writer) *tabwriter.Writer { return tabwriter.NewWriter(w, 0, 0, 2, ' ', 0) }

func inspectCmd(fs *flag.FlagSet) action {
	maxRecords := fs.Int("max-records", 1000, "list at most this many records per budget, newest last (0: all); totals always count all")
	return action{several: true, check: func(c *cli) error {
		if *maxRecords < 0 {
			return usagef("--max-records must not be negative")
		}
		return nil
	}, run: func(c *cli) error {
		// Several names: each limiter in turn (a blank line apart, one
		// JSON line each); the exit status is the worst of them.
		var worst error
		for i, name := range c.names {
			if i > 0 && !c.json() {
				fmt.Fprintln(c.stdout)
			}
			c.name = name
			err := inspectOne(c, *maxRecords)
			if worst == nil || errors.Is(worst, errRefused) && err != nil {
				worst = err
			}
		}
		return worst
	}}
}

// inspectOne shows the limiter c.name.
func inspectOne(c *cli, maxRecords int) error {
	in, err := inspect(c.ctx, c.rdb, c.name, c.keys(c.name))
	if err != nil {
		return err
	}
	if in.Future, err = futureOf(c.ctx, c.rdb, in); err != nil {
		return err
	}
	for i := range in.Budgets {
		if b := &in.Budgets[i]; maxRecords > 0 && len(b.Records) > maxRecords {
			b.Records = b.Records[len(b.Records)-maxRecords:]
		}
	}
	if err := c.emit(in, func(w io.Writer) { printInspection(w, in); printFuture(w, in.Future) }); err != nil {
		return err
	}
	if in.cfgErr != nil {
		return in.cfgErr
	}
	if err := corruption(in); err != nil {
		return err
	}
	if !in.Exists && len(in.Clients) == 0 && !anyState(in) {
		return errRefused
	}
	return nil
}

// corruption returns ErrCorruptState, as the library would, when a
// budget of the configured mode holds what the scripts refuse.
func corruption(in *inspection) error {
	for _, b := range in.Budgets {
		if b.Active && b.Corrupt != "" {
			return fmt.Errorf("%w: %s: %s", ratelimiter.ErrCorruptState, budgetName(b), b.Corrupt)
		}
	}
	return nil
}

// budgetName is "overall" or "client ID".
func budgetName(b budget) string {
	if b.Scope == "client" {
		return "client " + shown(b.ClientID)
	}
	return "overall"
}

func anyState(in *inspection) bool {
	for _, k := range in.Keys {
		if k.Type != "none" && k.Type != "" {
			return true
		}
	}
	return false
}

func printInspection(w io.Writer, in *inspection) {
	fmt.Fprintf(w, "limiter %s  (at %s)\n", shown(in.Name), in.Now.Format(time.RFC3339Nano))
	switch {
	case in.Config != nil:
		fmt.Fprintf(w, "config   %s: %s; ttl %s\n", shown(in.ConfigKey), describe(in.cfg), ttlText(in.TTLMS))
	case in.Exists:
		fmt.Fprintf(w, "config   %s: unreadable %s: %s\n", shown(in.ConfigKey), fieldsText(in.Fields), printable(in.cfgErr.Error()))
	default:
		fmt.Fprintf(w, "config   %s: absent (not configured)\n", shown(in.ConfigKey))
	}
	fmt.Fprintln(w, "\nkeys")
	tw := table(w)
	fmt.Fprintln(tw, "  ROLE\tKEY\tTYPE\tTTL")
	for _, k := range in.Keys {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", k.Role, shown(k.Key), k.Type, ttlText(k.TTLMS))
	}
	tw.Flush()
	if len(in.Clients) > 0 {
		fmt.Fprintf(w, "\nPER_CLIENT client ids found (SCAN): %s\n", strings.Join(shownAll(in.Clients), ", "))
	} else {
		fmt.Fprintln(w, "\nPER_CLIENT client ids found (SCAN): none")
	}
	for _, b := range in.Budgets {
		if !b.Active && b.Value == nil && len(b.Records) == 0 && (b.Scope == "client" || in.Config != nil) {
			continue // no state of a mode the limiter is not in
		}
		who := budgetName(b)
		mark := ""
		if b.Active {
			mark = " (active mode)"
		}
		val := "absent"
		switch {
		case b.Value != nil:
			val = strconv.FormatInt(*b.Value, 10)
		case b.ValueRaw != "":
			val = strconv.Quote(b.ValueRaw)
		}
		avail := " -"
		switch {
		case b.Corrupt != "":
			avail = ": corrupt (" + printable(b.Corrupt) + ")"
		case b.AvailableNow != nil:
			avail = " " + strconv.FormatInt(*b.AvailableNow, 10)
		}
		fmt.Fprintf(w, "\n%s%s\n  value %s = %s; available now%s\n", who, mark, shown(b.ValueKey), val, avail)
		fmt.Fprintf(w, "  in window: %d permits in %d records; past the interval, not yet released: %d permits in %d records\n",
			b.InWindow, b.RecordsWindow, b.ExpiredPermits, b.ExpiredRecords)
		if len(b.Writers) > 0 {
			fmt.Fprintf(w, "  window by writer: %s\n", writersText(b.Writers, b.InWindow))
		}
		if len(b.Records) == 0 {
			continue
		}
		if len(b.Records) < b.RecordsTotal {
			fmt.Fprintf(w, "  showing the newest %d of %d records (--max-records)\n", len(b.Records), b.RecordsTotal)
		}
		tw := table(w)
		fmt.Fprintln(tw, "  TIME\tAGE\tPERMITS\tFORMAT\tWRITER\tRANDOM\tSTATE")
		for _, r := range b.Records {
			state := "in window"
			if r.Expired {
				state = "expired, not released"
			}
			format, writer, random := r.Format, r.Writer, r.RandomHex
			if r.RandomText != "" {
				random += " (" + shown(r.RandomText) + ")"
			}
			if r.Error != "" {
				format, writer, random = "?", "?", r.RawHex
			}
			fmt.Fprintf(tw, "  %s\t%v\t%d\t%s\t%s\t%s\t%s\n", r.Time.Format("15:04:05.000"),
				wire.Millis(r.AgeMS), r.Permits, format, writer, random, state)
		}
		tw.Flush()
	}
}

func ttlText(ms int64) string {
	switch ms {
	case -1:
		return "none"
	case -2:
		return "-"
	}
	return wire.Millis(ms).String()
}

// fieldsText shows a config hash's fields, sorted, each name and value
// shown as names are.
func fieldsText(h map[string]string) string {
	names := make([]string, 0, len(h))
	for k := range h {
		names = append(names, k)
	}
	sort.Strings(names)
	parts := make([]string, len(names))
	for i, k := range names {
		parts[i] = shown(k) + "=" + strconv.Quote(h[k])
	}
	return "{" + strings.Join(parts, " ") + "}"
}

func shownAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = shown(s)
	}
	return out
}

// writersText lists writer shares with their percent of the window's
// permits: "redisson 12 (48%), go:1a2b3c4d 13 (52%)".
func writersText(ws []writerShare, total int64) string {
	parts := make([]string, len(ws))
	for i, w := range ws {
		parts[i] = fmt.Sprintf("%s %d (%d%%)", w.Writer, w.Permits, percent(w.Permits, total))
	}
	return strings.Join(parts, ", ")
}

// percent returns part of total in whole percent, 0 when total is 0.
func percent(part, total int64) int64 {
	if total <= 0 {
		return 0
	}
	return (part*100 + total/2) / total
}
