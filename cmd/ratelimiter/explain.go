package main

import (
	"flag"
	"fmt"
	"io"
	"sort"
	"time"

	"github.com/goredisson/ratelimiter"
	"github.com/goredisson/ratelimiter/wire"
)

func init() {
	adminCommand("explain", "say why n permits would be refused now: which records hold them and when each leaves; "+
		"with several names, which limiter binds (exit 0 granted now, 1 it would wait or is not configured; read-only)", "[--n N] [--output json]", explainCmd)
}

// blocker is one record that holds permits an ask needs, and when it
// leaves the window.
type blocker struct {
	record
	LeavesAt time.Time `json:"leaves_at"`
	InMS     int64     `json:"in_ms"`
}

// explanation is explain's answer for one limiter.
type explanation struct {
	Name      string `json:"name"`
	Asked     int64  `json:"asked"`
	Rate      int64  `json:"rate"`
	Available int64  `json:"available"`
	Granted   bool   `json:"granted_now"`
	// WaitMS is how long until the records in Blocking have left, when
	// enough permits are free if nobody else takes them first; -1 when
	// the records in the window do not account for the permits out (the
	// value and the records disagree: see inspect).
	WaitMS   int64     `json:"wait_ms"`
	Blocking []blocker `json:"blocking"`
	Binds    bool      `json:"binds,omitempty"` // several names: this one waits longest
}

func explainCmd(fs *flag.FlagSet) action {
	n := fs.Int64("n", 1, "permits asked for")
	return action{several: true, check: func(c *cli) error {
		if *n < 1 || *n > ratelimiter.MaxPermits {
			return usagef("--n %d out of range [1, %d]", *n, int64(ratelimiter.MaxPermits))
		}
		return nil
	}, run: func(c *cli) error {
		var all []*explanation
		for _, name := range c.names {
			lim := c.client.Limiter(name)
			if err := needClientID(c, lim); err != nil {
				return err
			}
			in, err := inspect(c.ctx, c.rdb, name, c.keys(name))
			if err != nil {
				return err
			}
			e, err := explain(in, activeBudget(in, c.client.ID()), *n)
			if err != nil {
				return err
			}
			all = append(all, e)
		}
		markBinding(all)
		granted := true
		for _, e := range all {
			if err := c.emit(e, func(w io.Writer) { printExplanation(w, e, len(all) > 1) }); err != nil {
				return err
			}
			granted = granted && e.Granted
		}
		if !granted {
			return errRefused
		}
		return nil
	}}
}

// explain works out, from an inspection and its active budget (nil: no
// state yet), what an ask of n permits meets now.
func explain(in *inspection, b *budget, n int64) (*explanation, error) {
	if in.Config == nil {
		if in.cfgErr != nil {
			return nil, in.cfgErr
		}
		// A LimiterError, as the library's: with several names, the
		// message names this one.
		return nil, &ratelimiter.LimiterError{Limiter: in.Name, Err: ratelimiter.ErrNotInitialized}
	}
	if err := corruption(in); err != nil {
		return nil, err
	}
	e := &explanation{Name: in.Name, Asked: n, Rate: in.cfg.Rate, Available: in.cfg.Rate}
	if n > in.cfg.Rate {
		return nil, fmt.Errorf("%w: %s: %d permits asked, rate %d", ratelimiter.ErrPermitsExceedRate, shown(in.Name), n, in.cfg.Rate)
	}
	if b != nil && b.AvailableNow != nil {
		e.Available = *b.AvailableNow
	}
	if e.Available >= n {
		e.Granted = true
		return e, nil
	}
	var live []record
	if b != nil {
		for _, r := range b.Records {
			if !r.Expired {
				live = append(live, r)
			}
		}
	}
	sort.SliceStable(live, func(i, j int) bool { return live[i].score < live[j].score })
	need, freed := n-e.Available, int64(0)
	e.WaitMS = -1
	for _, r := range live {
		leaves := time.UnixMilli(r.ScoreMS).Add(in.cfg.Interval)
		e.Blocking = append(e.Blocking, blocker{record: r, LeavesAt: leaves, InMS: leaves.Sub(in.Now).Milliseconds()})
		if freed += int64(r.Permits); freed >= need {
			e.WaitMS = max(0, leaves.Sub(in.Now).Milliseconds())
			break
		}
	}
	return e, nil
}

// markBinding marks, among several limiters' explanations, the one that
// waits longest: the limiter that binds a composite's ask.
func markBinding(all []*explanation) {
	if len(all) < 2 {
		return
	}
	var worst *explanation
	for _, e := range all {
		if e.Granted {
			continue
		}
		if worst == nil || e.WaitMS < 0 || worst.WaitMS >= 0 && e.WaitMS > worst.WaitMS {
			worst = e
		}
	}
	if worst != nil {
		worst.Binds = true
	}
}

func printExplanation(w io.Writer, e *explanation, several bool) {
	if e.Granted {
		fmt.Fprintf(w, "%s: %d of %d available: %d granted now\n", shown(e.Name), e.Available, e.Rate, e.Asked)
		return
	}
	binds := ""
	if several && e.Binds {
		binds = " (binds: waits longest)"
	}
	fmt.Fprintf(w, "%s: %d of %d available, %d asked: refused now%s\n", shown(e.Name), e.Available, e.Rate, e.Asked, binds)
	if len(e.Blocking) > 0 {
		fmt.Fprintf(w, "  %d more free as these records leave the window, oldest first:\n", e.Asked-e.Available)
		tw := table(w)
		fmt.Fprintln(tw, "  LEAVES\tIN\tPERMITS\tWRITER\tSTAMPED")
		for _, b := range e.Blocking {
			fmt.Fprintf(tw, "  %s\t%v\t%d\t%s\t%s\n", b.LeavesAt.Format("15:04:05.000"),
				wire.Millis(b.InMS), b.Permits, b.Writer, b.Time.Format("15:04:05.000"))
		}
		tw.Flush()
	}
	if e.WaitMS < 0 {
		fmt.Fprintln(w, "  the records in the window do not hold the permits out (the value and the records disagree: see inspect)")
		return
	}
	fmt.Fprintf(w, "  granted in %v, unless others take those permits first\n", wire.Millis(e.WaitMS))
}
