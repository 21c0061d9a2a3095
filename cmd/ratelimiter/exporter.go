package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/goredisson/ratelimiter"
)

func init() {
	commands["exporter"] = command{"serve Prometheus metrics of every limiter found by SCAN, Go's or Java's, on /metrics (read-only)", runExporter}
}

// exporterFlags are the exporter's own flags.
type exporterFlags struct {
	listen      string
	match       []string
	every       time.Duration
	maxLimiters int
	maxClients  int
	maxScans    int
	scanCount   int64
	maxRecords  int64
	idle        time.Duration
}

func (f *exporterFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.listen, "listen", "127.0.0.1:9464", "address to serve /metrics on (loopback by default; port 0 picks a free one)")
	fs.Func("match", "SCAN MATCH pattern for limiter names (config keys); repeat for several (default *)", func(s string) error {
		if s == "" {
			return errors.New("empty pattern")
		}
		f.match = append(f.match, s)
		return nil
	})
	fs.DurationVar(&f.every, "every", 5*time.Second, "how often to read Redis; scrapes get the last reading")
	fs.IntVar(&f.maxLimiters, "max-limiters", 1000, "most limiters exported, in name order")
	fs.IntVar(&f.maxClients, "max-clients", 50, "most PER_CLIENT client ids exported per limiter")
	fs.IntVar(&f.maxScans, "max-scans", 1000, "most SCAN calls per pattern (and cluster master) per reading")
	fs.Int64Var(&f.scanCount, "scan-count", 1000, "SCAN COUNT hint")
	fs.Int64Var(&f.maxRecords, "max-records", recountMax+1, "most permit records fetched per budget and query")
	fs.DurationVar(&f.idle, "idle", 7*24*time.Hour, "ratelimiter_idle_limiters counts exported limiters with no TTL and no record newer than this (ratelimiter sweep lists them)")
}

func (f *exporterFlags) check() error {
	switch {
	case f.every < 100*time.Millisecond:
		return usagef("--every must be at least 100ms")
	case f.idle <= 0:
		return usagef("--idle must be positive")
	case f.maxLimiters < 1 || f.maxClients < 1 || f.maxScans < 1 || f.scanCount < 1 || f.maxRecords < 1:
		return usagef("--max-limiters, --max-clients, --max-scans, --scan-count and --max-records must be at least 1")
	}
	if _, _, err := net.SplitHostPort(f.listen); err != nil {
		return usagef("--listen must be host:port: %v", err)
	}
	if len(f.match) == 0 {
		f.match = []string{"*"}
	}
	return nil
}

// runExporter is the exporter command: it reads Redis every --every and
// serves the last reading until interrupted.
func runExporter(argv []string, stdout, stderr io.Writer) int {
	var f exporterFlags
	cmd := standalone{name: "exporter", register: f.register, check: f.check,
		usage: "usage: ratelimiter exporter [--listen 127.0.0.1:9464] [--match PATTERN ...] [--every 5s]\n\nServes Prometheus text on /metrics for the limiters found by SCAN."}
	return cmd.run(argv, stdout, stderr, func(se session) int {
		x := &exporter{rdb: se.rdb, f: f, timeout: se.g.timeout}
		if err := x.collect(se.ctx); err != nil {
			return se.fail(2, "reading Redis: %s", redact(err.Error(), se.g.effectiveURL()))
		}
		ln, err := net.Listen("tcp", f.listen)
		if err != nil {
			return se.fail(2, "%v", err)
		}
		fmt.Fprintf(stdout, "serving http://%s/metrics\n", ln.Addr())
		return x.serve(se.ctx, ln, stderr)
	})
}

// exporter holds the last reading.
type exporter struct {
	rdb     redis.UniversalClient
	f       exporterFlags
	timeout time.Duration
	page    atomic.Pointer[[]byte]
	stats   exporterStats
	last    collection
	prevMS  int64            // Redis time of the previous reading
	prev    map[string]int64 // permits key -> Redis time it was read at
}

// exporterStats are the exporter's own figures.
type exporterStats struct {
	up          bool
	errors      int64
	lastSuccess time.Time
}

// serve answers /metrics and reads Redis every f.every until ctx is done.
func (x *exporter) serve(ctx context.Context, ln net.Listener, stderr io.Writer) int {
	mux := http.NewServeMux()
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", promContentType)
		_, _ = w.Write(*x.page.Load())
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	tick := time.NewTicker(x.f.every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			_ = srv.Shutdown(sctx)
			return 0
		case err := <-done:
			fmt.Fprintf(stderr, "ratelimiter exporter: %s\n", oneLine(err.Error()))
			return 2
		case <-tick.C:
			if err := x.collect(ctx); err != nil && ctx.Err() == nil {
				fmt.Fprintf(stderr, "ratelimiter exporter: reading Redis: %s\n", oneLine(err.Error()))
			}
		}
	}
}

// collect reads every limiter found and publishes the page. On failure
// the page keeps the previous reading, marked down.
func (x *exporter) collect(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, max(x.f.every, x.timeout))
	defer cancel()
	start := time.Now()
	c, err := x.read(ctx)
	if err != nil {
		x.stats.up = false
		x.stats.errors++
		page := render(x.last, &x.stats)
		x.page.Store(&page)
		return err
	}
	c.took = time.Since(start)
	x.stats.up, x.stats.lastSuccess, x.last = true, time.Now(), c
	page := render(c, &x.stats)
	x.page.Store(&page)
	return nil
}

// read makes one reading at Redis's time.
func (x *exporter) read(ctx context.Context) (collection, error) {
	var c collection
	t, err := x.rdb.Time(ctx).Result()
	if err != nil {
		return c, err
	}
	nowMS := t.UnixMilli()
	res, err := findLimiters(ctx, x.rdb, findLimits{patterns: x.f.match, count: x.f.scanCount, maxScans: x.f.maxScans, maxLimiters: x.f.maxLimiters})
	if err != nil {
		return c, err
	}
	c.truncated = res.truncated
	if ev, err := ratelimiter.NewClient(x.rdb).Eviction(ctx); err == nil {
		c.eviction = &ev
	}
	lim := readLimits{count: x.f.scanCount, maxScans: x.f.maxScans, maxClients: x.f.maxClients, maxRecords: x.f.maxRecords}
	next := map[string]int64{}
	for _, f := range res.limiters {
		st, err := readLimiter(ctx, x.rdb, f, nowMS, x.prev, lim)
		if err != nil {
			return c, fmt.Errorf("limiter %s: %w", strings.TrimSpace(shown(f.name)), err)
		}
		c.truncated = c.truncated || st.clientsTruncated
		var newest int64
		for _, b := range st.budgets {
			next[b.permitsKey] = nowMS
			newest = max(newest, b.newestMS)
		}
		if st.ttl < 0 && (newest == 0 || nowMS-newest > x.f.idle.Milliseconds()) {
			c.idle++
		}
		c.limiters = append(c.limiters, st)
	}
	if x.prevMS > 0 && nowMS > x.prevMS {
		c.elapsed = time.Duration(nowMS-x.prevMS) * time.Millisecond
	}
	x.prevMS, x.prev = nowMS, next
	return c, nil
}
