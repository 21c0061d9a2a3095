package main

import (
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

func init() {
	adminCommand("inspect", "show config, TTLs, values and every permit record decoded (read-only)", "[--max-records N] [-o json]", inspectCmd)
}

func table(w io.Writer) *tabwriter.Writer { return tabwriter.NewWriter(w, 0, 0, 2, ' ', 0) }

func inspectCmd(fs *flag.FlagSet) action {
	maxRecords := fs.Int("max-records", 1000, "list at most this many records per budget, newest last (0: all); totals always count all")
	return action{check: func(c *cli) error {
		if *maxRecords < 0 {
			return usagef("--max-records must not be negative")
		}
		return nil
	}, run: func(c *cli) error {
		in, err := inspect(c.ctx, c.rdb, c.lim)
		if err != nil {
			return err
		}
		for i := range in.Budgets {
			if b := &in.Budgets[i]; *maxRecords > 0 && len(b.Records) > *maxRecords {
				b.Records = b.Records[len(b.Records)-*maxRecords:]
			}
		}
		if err := c.emit(in, func(w io.Writer) { printInspection(w, in) }); err != nil {
			return err
		}
		if in.cfgErr != nil {
			return in.cfgErr
		}
		if !in.Exists && len(in.Clients) == 0 && !anyState(in) {
			return errRefused
		}
		return nil
	}}
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
	fmt.Fprintf(w, "limiter %s  (at %s)\n", in.Name, in.Now.Format(time.RFC3339Nano))
	switch {
	case in.Config != nil:
		fmt.Fprintf(w, "config   %s: %s; ttl %s\n", in.ConfigKey, describe(in.cfg), ttlText(in.TTLMS))
	case in.Exists:
		fmt.Fprintf(w, "config   %s: unreadable %v: %v\n", in.ConfigKey, in.Fields, in.cfgErr)
	default:
		fmt.Fprintf(w, "config   %s: absent (not configured)\n", in.ConfigKey)
	}
	fmt.Fprintln(w, "\nkeys")
	tw := table(w)
	fmt.Fprintln(tw, "  ROLE\tKEY\tTYPE\tTTL")
	for _, k := range in.Keys {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", k.Role, k.Key, k.Type, ttlText(k.TTLMS))
	}
	tw.Flush()
	if len(in.Clients) > 0 {
		fmt.Fprintf(w, "\nPER_CLIENT client ids found (SCAN): %s\n", strings.Join(in.Clients, ", "))
	} else {
		fmt.Fprintln(w, "\nPER_CLIENT client ids found (SCAN): none")
	}
	for _, b := range in.Budgets {
		if !b.Active && b.Value == nil && len(b.Records) == 0 && (b.Scope == "client" || in.Config != nil) {
			continue // no state of a mode the limiter is not in
		}
		who := "overall"
		if b.Scope == "client" {
			who = "client " + b.ClientID
		}
		mark := ""
		if b.Active {
			mark = " (active mode)"
		}
		val := "absent"
		if b.Value != nil {
			val = strconv.FormatInt(*b.Value, 10)
		}
		avail := "-"
		if b.AvailableNow != nil {
			avail = strconv.FormatInt(*b.AvailableNow, 10)
		}
		fmt.Fprintf(w, "\n%s%s\n  value %s = %s; available now %s\n", who, mark, b.ValueKey, val, avail)
		fmt.Fprintf(w, "  in window: %d permits in %d records; past the interval, not yet released: %d permits in %d records\n",
			b.InWindow, b.RecordsWindow, b.ExpiredPermits, b.ExpiredRecords)
		if len(b.Records) == 0 {
			continue
		}
		if len(b.Records) < b.RecordsTotal {
			fmt.Fprintf(w, "  showing the newest %d of %d records (--max-records)\n", len(b.Records), b.RecordsTotal)
		}
		tw := table(w)
		fmt.Fprintln(tw, "  TIME\tAGE\tPERMITS\tFORMAT\tRANDOM\tSTATE")
		for _, r := range b.Records {
			state := "in window"
			if r.Expired {
				state = "expired, not released"
			}
			format, random := r.Format, r.RandomHex
			if r.RandomText != "" {
				random += " (" + r.RandomText + ")"
			}
			if r.Error != "" {
				format, random = "?", r.RawHex
			}
			fmt.Fprintf(tw, "  %s\t%v\t%d\t%s\t%s\t%s\n", r.Time.Format("15:04:05.000"),
				time.Duration(r.AgeMS)*time.Millisecond, r.Permits, format, random, state)
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
	return (time.Duration(ms) * time.Millisecond).String()
}
