package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/goredisson/ratelimiter"
)

const demoSummary = "run workers against a limiter and print grants per second"

// runDemo shows a limit holding: workers call Acquire as fast as the
// limiter lets them, and a line per second prints what was granted.
func runDemo(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("ratelimiter demo", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	// The default is not $REDIS_URL itself: -h prints defaults, and the
	// URL may hold a password.
	url := fs.String("url", "", "Redis URL (default $REDIS_URL; neither: start a throwaway local redis-server)")
	name := fs.String("name", "demo", "limiter name")
	rate := fs.Int64("rate", 10, "permits per interval")
	interval := fs.Duration("interval", time.Second, "interval")
	workers := fs.Int("workers", 4, "goroutines acquiring permits")
	duration := fs.Duration("duration", 10*time.Second, "how long to run (0: until interrupted)")
	switch pos, err := parseInterleaved(fs, args); {
	case err == flag.ErrHelp:
		printHelp(stdout, "usage: ratelimiter demo [--url URL] [--name demo] [--rate 10] [--interval 1s] [--workers 4] [--duration 10s]\n\n"+
			demoSummary+"; without --url and $REDIS_URL, on a throwaway local redis-server.", fs)
		return 0
	case err != nil:
		fmt.Fprintf(stderr, "ratelimiter demo: %v (see ratelimiter demo --help)\n", err)
		return 2
	case len(pos) > 0:
		fmt.Fprintf(stderr, "ratelimiter demo: unexpected argument %s\n", shown(pos[0]))
		return 2
	}
	if *url == "" {
		*url = os.Getenv("REDIS_URL")
	}
	if *workers < 1 || *duration < 0 {
		fmt.Fprintln(stderr, "ratelimiter demo: --workers must be >= 1 and --duration >= 0")
		return 2
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if *duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, *duration)
		defer cancel()
	}

	var opts *redis.Options
	if *url == "" {
		srv, err := startThrowaway(ctx)
		if err != nil {
			fmt.Fprintln(stderr, "ratelimiter demo:", err)
			return 2
		}
		defer srv.Close()
		fmt.Fprintf(stdout, "started a throwaway redis-server on %s\n", srv.Addr())
		opts = &redis.Options{Addr: srv.Addr()}
	} else {
		var err error
		if opts, err = parseURL(*url); err != nil {
			fmt.Fprintln(stderr, "ratelimiter demo:", err)
			return 2
		}
	}
	rdb := redis.NewClient(opts)
	defer rdb.Close()

	// The slowest granting call: a grant is decided somewhere within its
	// call, so grants' return times can crowd a window by up to that much.
	var slowest atomic.Int64
	hooks := ratelimiter.WithHooks(ratelimiter.Hooks{Decision: func(d ratelimiter.Decision) {
		for rt := int64(d.RoundTrip); d.Granted; {
			cur := slowest.Load()
			if rt <= cur || slowest.CompareAndSwap(cur, rt) {
				break
			}
		}
	}})
	l := ratelimiter.NewClient(rdb, hooks).Limiter(*name)
	cfg := ratelimiter.Config{Mode: ratelimiter.Overall, Rate: *rate, Interval: *interval}
	if err := l.SetRate(ctx, cfg); err != nil {
		fmt.Fprintln(stderr, "ratelimiter demo:", redact(err.Error(), *url))
		return 2
	}
	fmt.Fprintf(stdout, "limiter %q: %d permits per %v, %d workers\n", *name, *rate, *interval, *workers)

	var (
		mu     sync.Mutex
		grants []time.Time
		runErr error
		wg     sync.WaitGroup
	)
	for w := 0; w < *workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				err := l.Acquire(ctx, 1)
				mu.Lock()
				if err == nil {
					grants = append(grants, time.Now())
				} else if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) && runErr == nil {
					runErr = err
				}
				mu.Unlock()
				if err != nil {
					return
				}
			}
		}()
	}

	start := time.Now()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	last := 0
	for done := false; !done; {
		select {
		case <-ctx.Done():
			done = true
		case <-tick.C:
			mu.Lock()
			n := len(grants)
			mu.Unlock()
			perSec := n - last
			last = n
			avail, _ := l.AvailablePermits(context.Background())
			fmt.Fprintf(stdout, "%4.0fs  granted %4d  available %4d  %s\n",
				time.Since(start).Seconds(), perSec, avail, bar(perSec, *rate, *interval))
		}
	}
	wg.Wait()
	if runErr != nil {
		fmt.Fprintln(stderr, "ratelimiter demo:", redact(runErr.Error(), *url))
		return 2
	}
	// Counted by return times, over windows of the interval less the
	// slowest granting call: the limiter holds the rate by the records'
	// stamps, which a grant's return time follows by up to its call.
	rt := time.Duration(slowest.Load()).Round(time.Millisecond)
	worst := worstWindow(grants, max(*interval-rt, *interval/2))
	fmt.Fprintf(stdout, "total granted %d in %.1fs; most in any %v window (less the slowest call, %v): %d (limit %d)\n",
		len(grants), time.Since(start).Seconds(), *interval, rt, worst, *rate)
	if int64(worst) > *rate {
		return 1
	}
	return 0
}

// bar draws grants per second against the rate per second.
func bar(perSec int, rate int64, interval time.Duration) string {
	limit := float64(rate) / interval.Seconds()
	const width = 40
	filled := width
	if limit > 0 {
		filled = int(float64(perSec) / limit * width / 1.25)
	}
	filled = max(0, min(filled, width))
	mark := int(width / 1.25)
	s := []rune(strings.Repeat("#", filled) + strings.Repeat(" ", width-filled))
	s[mark-1] = '|'
	return "[" + string(s) + "]"
}

// worstWindow returns the most grants that fall in any half-open window
// [t, t+interval), measured from the grants' own times.
func worstWindow(times []time.Time, interval time.Duration) int {
	sort.Slice(times, func(i, j int) bool { return times[i].Before(times[j]) })
	worst, j := 0, 0
	for i := range times {
		for times[i].Sub(times[j]) >= interval {
			j++
		}
		worst = max(worst, i-j+1)
	}
	return worst
}
