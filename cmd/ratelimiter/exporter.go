package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/exporter-toolkit/web"
	"github.com/redis/go-redis/v9"
	"go.yaml.in/yaml/v2"

	"github.com/goredisson/ratelimiter/diag"
	"github.com/goredisson/ratelimiter/wire"
)

func init() {
	commands["exporter"] = command{"serve Prometheus metrics of every limiter found by SCAN, Go's or Java's, read on each scrape (read-only)", runExporter}
}

// Paths the exporter serves besides the telemetry path.
const (
	healthyPath = "/-/healthy"
	readyPath   = "/-/ready"
)

// exporterFlags are the exporter's own flags.
type exporterFlags struct {
	listen         []string // --web.listen-address, repeated
	webConfig      string
	telemetryPath  string
	match          []string
	collectTimeout time.Duration
	maxLimiters    int
	maxClients     int
	maxScans       int
	scanCount      int64
	maxRecords     int64
	idle           time.Duration
	tls            bool // the web config file turns TLS on (set by check)
}

// defaultListen is --web.listen-address's default: loopback, so that a
// bare "ratelimiter exporter" exposes nothing beyond the host.
const defaultListen = "127.0.0.1:9464"

func (f *exporterFlags) register(fs *flag.FlagSet) {
	fs.Func("web.listen-address", "address to serve on, host:port; repeat for several (default "+defaultListen+", loopback; port 0 picks a free one)", func(s string) error {
		if s == "" {
			return errors.New("empty address")
		}
		f.listen = append(f.listen, s)
		return nil
	})
	fs.StringVar(&f.webConfig, "web.config.file", "", "exporter-toolkit web configuration file (YAML) for TLS and basic auth: https://github.com/prometheus/exporter-toolkit/blob/master/docs/web-configuration.md")
	fs.StringVar(&f.telemetryPath, "web.telemetry-path", "/metrics", "path under which to serve the metrics")
	fs.Func("match", "SCAN MATCH pattern for limiter names (config keys); repeat for several (default *)", func(s string) error {
		if s == "" {
			return errors.New("empty pattern")
		}
		f.match = append(f.match, s)
		return nil
	})
	fs.DurationVar(&f.collectTimeout, "collect-timeout", 10*time.Second, "bound on one scrape's reading of Redis; keep it below Prometheus's scrape_timeout")
	fs.IntVar(&f.maxLimiters, "max-limiters", 1000, "most limiters exported, in name order")
	fs.IntVar(&f.maxClients, "max-clients", 50, "most PER_CLIENT client ids exported per limiter")
	fs.IntVar(&f.maxScans, "max-scans", 1000, "most SCAN calls per pattern (and cluster master) per scrape")
	fs.Int64Var(&f.scanCount, "scan-count", 1000, "SCAN COUNT hint")
	fs.Int64Var(&f.maxRecords, "max-records", wire.RecountMax+1, "most permit records fetched per budget and query")
	fs.DurationVar(&f.idle, "idle", 7*24*time.Hour, "ratelimiter_idle_limiters counts exported limiters with no TTL and no record newer than this (ratelimiter sweep lists them)")
}

// check validates the flags and reads the web configuration file, so that
// a bad file is a usage error before anything is sent to Redis.
func (f *exporterFlags) check() error {
	switch {
	case f.collectTimeout < 100*time.Millisecond:
		return usagef("--collect-timeout must be at least 100ms")
	case f.idle <= 0:
		return usagef("--idle must be positive")
	case f.maxLimiters < 1 || f.maxClients < 1 || f.maxScans < 1 || f.scanCount < 1 || f.maxRecords < 1:
		return usagef("--max-limiters, --max-clients, --max-scans, --scan-count and --max-records must be at least 1")
	case !strings.HasPrefix(f.telemetryPath, "/") || f.telemetryPath == "/" || f.telemetryPath == healthyPath || f.telemetryPath == readyPath:
		return usagef("--web.telemetry-path must start with / and not be /, %s or %s", healthyPath, readyPath)
	}
	if len(f.listen) == 0 {
		f.listen = []string{defaultListen}
	}
	for _, a := range f.listen {
		if _, _, err := net.SplitHostPort(a); err != nil {
			return usagef("--web.listen-address must be host:port: %v", err)
		}
	}
	if len(f.match) == 0 {
		f.match = []string{"*"}
	}
	if f.webConfig != "" {
		if err := web.Validate(f.webConfig); err != nil {
			return usagef("--web.config.file %s: %v", f.webConfig, err)
		}
		b, err := os.ReadFile(f.webConfig)
		if err != nil {
			return usagef("--web.config.file: %v", err)
		}
		var c web.Config
		if err := yaml.Unmarshal(b, &c); err != nil {
			return usagef("--web.config.file %s: %v", f.webConfig, err)
		}
		f.tls = c.TLSConfig.IsEnabled()
	}
	return nil
}

// runExporter is the exporter command: it checks that Redis answers with
// one reading, then serves the metrics, reading Redis on each scrape,
// until interrupted.
func runExporter(argv []string, stdout, stderr io.Writer) int {
	var f exporterFlags
	cmd := standalone{name: "exporter", register: f.register, check: f.check, connOnly: true,
		usage: "usage: ratelimiter exporter [--web.listen-address 127.0.0.1:9464 ...] [--web.config.file FILE] [--match PATTERN ...]\n\n" +
			"Serves Prometheus metrics (text or OpenMetrics) of the limiters found by SCAN, read on each scrape,\n" +
			"with " + healthyPath + ", " + readyPath + " and a landing page on /."}
	return cmd.run(argv, stdout, stderr, func(se session) int {
		redactErr := func(err error) string { return redact(err.Error(), se.g.effectiveURL()) }
		x := &exporter{rdb: se.rdb, f: f, ctx: se.ctx, descs: map[string]*prometheus.Desc{},
			logf: func(format string, args ...any) {
				fmt.Fprintf(stderr, "ratelimiter exporter: %s\n", oneLine(fmt.Sprintf(format, args...)))
			},
			redact: redactErr}
		// Bind first: an address in use fails before Redis is read.
		var lns []net.Listener
		defer func() {
			for _, ln := range lns {
				_ = ln.Close()
			}
		}()
		for _, a := range f.listen {
			ln, err := net.Listen("tcp", a)
			if err != nil {
				return se.fail(2, "%v", err)
			}
			lns = append(lns, ln)
		}
		if _, err := x.collect(); err != nil {
			return se.fail(2, "reading Redis: %s", redactErr(err))
		}
		h, err := x.handler(se.g.timeout)
		if err != nil {
			return se.fail(2, "%v", err)
		}
		scheme := "http"
		if f.tls {
			scheme = "https"
		}
		for _, ln := range lns {
			fmt.Fprintf(stdout, "serving %s://%s%s\n", scheme, ln.Addr(), f.telemetryPath)
		}
		return serveAll(se.ctx, lns, h, f.webConfig, stderr)
	})
}

// serveAll serves h on every listener through exporter-toolkit's web
// package (TLS and basic auth from webConfig) until ctx is done (exit 0)
// or a listener fails (exit 2). Each listener gets its own http.Server:
// web.Serve wraps the server's handler, so one shared server would be
// wrapped once per listener, concurrently.
func serveAll(ctx context.Context, lns []net.Listener, h http.Handler, webConfig string, stderr io.Writer) int {
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	done := make(chan error, len(lns))
	var servers []*http.Server
	for _, ln := range lns {
		srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
		servers = append(servers, srv)
		noSystemd := false
		flags := &web.FlagConfig{WebListenAddresses: &[]string{ln.Addr().String()}, WebSystemdSocket: &noSystemd, WebConfigFile: &webConfig}
		go func() { done <- web.Serve(ln, srv, flags, logger) }()
	}
	shutdown := func() {
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		for _, srv := range servers {
			_ = srv.Shutdown(sctx)
		}
	}
	select {
	case <-ctx.Done():
		shutdown()
		return 0
	case err := <-done:
		shutdown()
		fmt.Fprintf(stderr, "ratelimiter exporter: %s\n", oneLine(err.Error()))
		return 2
	}
}

// handler routes the telemetry path, the health endpoints and the landing
// page. The metrics are served by promhttp: OpenMetrics when the scraper
// asks for it, gzip when it accepts it.
func (x *exporter) handler(redisTimeout time.Duration) (http.Handler, error) {
	reg := prometheus.NewRegistry()
	if err := reg.Register(x); err != nil {
		return nil, err
	}
	if err := reg.Register(collectors.NewGoCollector()); err != nil {
		return nil, err
	}
	if err := reg.Register(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})); err != nil {
		return nil, err
	}
	landing, err := web.NewLandingPage(web.LandingConfig{
		RoutePrefix: "/",
		Name:        "ratelimiter exporter",
		Description: "Redisson-compatible rate limiters in Redis, Go's and Java's, read on each scrape",
		Version:     version(),
		Links: []web.LandingLinks{
			{Address: x.f.telemetryPath, Text: "Metrics"},
			{Address: healthyPath, Text: "Health", Description: "200 while the exporter runs"},
			{Address: readyPath, Text: "Readiness", Description: "200 when Redis answers PING, 503 when not"},
		},
	})
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle(x.f.telemetryPath, promhttp.InstrumentMetricHandler(reg, promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		EnableOpenMetrics: true,
		ErrorHandling:     promhttp.ContinueOnError,
		ErrorLog:          promLogger{x.logf},
	})))
	mux.HandleFunc(healthyPath, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = io.WriteString(w, "Healthy\n")
	})
	mux.HandleFunc(readyPath, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		ctx, cancel := context.WithTimeout(r.Context(), redisTimeout)
		defer cancel()
		if err := x.rdb.Ping(ctx).Err(); err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = io.WriteString(w, "Not ready: Redis: "+oneLine(x.redact(err))+"\n")
			return
		}
		_, _ = io.WriteString(w, "Ready\n")
	})
	mux.Handle("/", landing)
	return mux, nil
}

// promLogger sends promhttp's errors (a series that could not be
// encoded, a write to a scraper that went away) to stderr.
type promLogger struct{ logf func(string, ...any) }

// Println writes v as one "ratelimiter exporter: ..." line on stderr; it
// returns nothing and cannot fail (promhttp.Logger).
func (l promLogger) Println(v ...any) { l.logf("%s", fmt.Sprint(v...)) }

// exporter is a prometheus.Collector that reads Redis on each scrape.
// Collections run one at a time: a scrape that arrives while one runs
// waits for it, and takes the next reading unless one that started
// after it arrived has finished meanwhile (then it gets that reading), so
// that Redis serves one reading at a time and a burst of concurrent
// scrapes costs at most two: the one under way and the next.
type exporter struct {
	rdb    redis.UniversalClient
	f      exporterFlags
	ctx    context.Context // ends with the command; collections stop with it
	logf   func(format string, args ...any)
	redact func(error) string // an error's text without the URL's password

	mu          sync.Mutex // one collection at a time; guards the fields below
	descs       map[string]*prometheus.Desc
	errors      int64
	lastSuccess time.Time
	lastStart   time.Time           // when the last collection started
	last        []prometheus.Metric // what it produced
	prevMS      int64               // Redis time of the previous successful reading
	prev        map[string]int64    // permits key -> Redis time it was read at
}

// Describe sends nothing: the series depend on what Redis holds, so the
// exporter is an unchecked collector.
func (x *exporter) Describe(chan<- *prometheus.Desc) {}

// Collect reads Redis (or shares a reading, see exporter) and sends the
// limiters' series and the exporter's own. A failed reading sends only
// the exporter's own series, ratelimiter_exporter_up 0 among them.
func (x *exporter) Collect(ch chan<- prometheus.Metric) {
	arrived := time.Now()
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.lastStart.After(arrived) {
		for _, m := range x.last {
			ch <- m
		}
		return
	}
	ms, err := x.collectLocked()
	if err != nil && x.ctx.Err() == nil {
		x.logf("reading Redis: %s", x.redact(err))
	}
	for _, m := range ms {
		ch <- m
	}
}

// collect is one reading outside a scrape (the check at start).
func (x *exporter) collect() ([]prometheus.Metric, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.collectLocked()
}

// collectLocked reads Redis within --collect-timeout and returns the
// series, with the error that made the reading fail, if any.
func (x *exporter) collectLocked() ([]prometheus.Metric, error) {
	start := time.Now()
	x.lastStart = start
	ctx, cancel := context.WithTimeout(x.ctx, x.f.collectTimeout)
	defer cancel()
	c, err := x.read(ctx)
	s := &sink{descs: x.descs}
	if err == nil {
		x.lastSuccess = time.Now()
		render(s, c)
	} else {
		x.errors++
	}
	s.gauge("ratelimiter_exporter_collect_seconds", "Duration of this scrape's reading of Redis, successful or not.", time.Since(start).Seconds())
	s.gauge("ratelimiter_exporter_last_success_timestamp_seconds", "Unix time of the last successful reading.", float64(x.lastSuccess.UnixMilli())/1e3)
	s.add("ratelimiter_exporter_collect_errors_total", prometheus.CounterValue, "Readings that failed (Redis unreachable, a timeout, a refused command).", float64(x.errors))
	s.gauge("ratelimiter_exporter_up", "1 when this scrape's reading of Redis succeeded; 0 when it failed (then no limiter series are sent).", b2f(err == nil))
	x.last = s.out
	return s.out, err
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
	if ev, err := diag.ReadEviction(ctx, x.rdb); err == nil {
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
		c.elapsed = wire.Millis(nowMS - x.prevMS)
	}
	x.prevMS, x.prev = nowMS, next
	return c, nil
}
