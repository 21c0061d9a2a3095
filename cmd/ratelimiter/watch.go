package main

import (
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/goredisson/ratelimiter"
)

func init() {
	adminCommand("watch", "refresh available permits, grants per second and a bar every second until interrupted "+
		"(exit 1 if the limiter was not configured at some refresh; read-only)",
		"[--every D] [--count N] [--output json]", watchCmd)
}

// activeBudget is the budget of the configured mode for this client.
func activeBudget(in *inspection, clientID string) *budget {
	for i := range in.Budgets {
		b := &in.Budgets[i]
		if in.cfg.Mode == ratelimiter.Overall && b.Scope == "overall" {
			return b
		}
		if in.cfg.Mode == ratelimiter.PerClient && b.Scope == "client" && b.ClientID == clientID {
			return b
		}
	}
	return nil
}

func watchCmd(fs *flag.FlagSet) action {
	every := fs.Duration("every", time.Second, "refresh period")
	count := fs.Int("count", 0, "stop after this many refreshes (0: until interrupted)")
	return action{
		check: func(c *cli) error {
			if *every < 10*time.Millisecond {
				return usagef("--every must be at least 10ms")
			}
			if *count < 0 {
				return usagef("--count must not be negative")
			}
			return nil
		},
		run: func(c *cli) error {
			tick := time.NewTicker(*every)
			defer tick.Stop()
			// Refreshes that found no config: watch then exits 1 (it
			// could not show the limiter every time it was asked to).
			refreshes, missing := 0, 0
			done := func() error {
				if missing == 0 {
					return nil
				}
				word := "refreshes"
				if refreshes == 1 {
					word = "refresh"
				}
				fmt.Fprintf(c.stderr, "ratelimiter watch: limiter %q was not configured at %d of %d %s\n", c.name, missing, refreshes, word)
				return errRefused
			}
			for i := 0; *count == 0 || i < *count; i++ {
				if i > 0 {
					select {
					case <-c.ctx.Done():
						return done()
					case <-tick.C:
					}
				}
				in, err := inspect(c.ctx, c.rdb, c.name, c.keys(c.name))
				if err != nil {
					if c.ctx.Err() != nil {
						return done()
					}
					return err
				}
				if err := c.emit(watchLine(in, c.client.ID()), func(w io.Writer) { printWatch(w, in, c.client.ID()) }); err != nil {
					return err
				}
				refreshes++
				if in.Config == nil {
					missing++
				}
			}
			return done()
		},
	}
}

type watchJSON struct {
	Time       time.Time `json:"time"`
	Name       string    `json:"name"`
	Exists     bool      `json:"exists"`
	Rate       int64     `json:"rate"`
	IntervalMS int64     `json:"interval_ms"`
	Available  *int64    `json:"available"`
	InWindow   int64     `json:"permits_in_window"`
	LastSecond int64     `json:"granted_last_second"`
	Clients    int       `json:"per_client_ids"`
	// Writers is the window's permits by writer (inspect's), most first;
	// in PER_CLIENT mode without --client-id, every client's summed.
	Writers []writerShare `json:"writers"`
}

func watchLine(in *inspection, clientID string) watchJSON {
	out := watchJSON{Time: in.Now, Name: in.Name, Exists: in.Config != nil, Clients: len(in.Clients)}
	if in.Config == nil {
		return out
	}
	out.Rate, out.IntervalMS = in.cfg.Rate, in.cfg.Interval.Milliseconds()
	sum := func(b *budget) {
		for _, r := range b.Records {
			if in.Now.UnixMilli()-r.ScoreMS < 1000 {
				out.LastSecond += int64(r.Permits)
			}
		}
	}
	if b := activeBudget(in, clientID); b != nil {
		out.Available, out.InWindow, out.Writers = b.AvailableNow, b.InWindow, b.Writers
	} else if in.cfg.Mode == ratelimiter.Overall {
		a := in.cfg.Rate // no state yet
		out.Available = &a
	} else {
		// PER_CLIENT without this client's budget: the window totals of
		// every client; available is per client, so unknown here.
		var recs []record
		for _, b := range in.Budgets {
			if b.Active {
				out.InWindow += b.InWindow
				recs = append(recs, b.Records...)
			}
		}
		out.Writers = writerShares(recs)
	}
	// Grants per second count every client's records in PER_CLIENT mode.
	for i := range in.Budgets {
		if in.Budgets[i].Active {
			sum(&in.Budgets[i])
		}
	}
	return out
}

func printWatch(w io.Writer, in *inspection, clientID string) {
	l := watchLine(in, clientID)
	if !l.Exists {
		fmt.Fprintf(w, "%s  %s: not configured\n", l.Time.Format("15:04:05"), shown(l.Name))
		return
	}
	avail := "-"
	if l.Available != nil {
		avail = strconv.FormatInt(*l.Available, 10)
	}
	fmt.Fprintf(w, "%s  available %6s/%d  in window %6d  granted/s %6d  %s%s\n",
		l.Time.Format("15:04:05"), avail, l.Rate, l.InWindow, l.LastSecond, meter(l.InWindow, l.Rate), sidesText(l.Writers))
}

// meter draws the permits used in the window against the rate.
func meter(used, rate int64) string {
	const width = 30
	filled := 0
	if rate > 0 {
		filled = int(min(used, rate) * width / rate)
	}
	return "[" + strings.Repeat("#", filled) + strings.Repeat(".", width-filled) + "]"
}

// sidesText gives Redisson's and this library's share of the window's
// permits, "  redisson 48%  go 52% (3 clients)", or "" for an empty window.
func sidesText(ws []writerShare) string {
	goPermits, others := sides(ws)
	total := goPermits + others
	if total == 0 {
		return ""
	}
	tagged := 0
	for _, w := range ws {
		if strings.HasPrefix(w.Writer, "go:") {
			tagged++
		}
	}
	text := fmt.Sprintf("  redisson %d%%  go %d%%", percent(others, total), percent(goPermits, total))
	if tagged > 1 {
		text += fmt.Sprintf(" (%d clients)", tagged)
	}
	return text
}
