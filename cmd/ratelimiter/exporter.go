package main

import (
	"bufio"
	"compress/gzip"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/exporter-toolkit/web"
	"github.com/redis/go-redis/v9"
	"go.yaml.in/yaml/v2"

	"github.com/goredisson/ratelimiter"
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
// bare "ratelimiter exporter" exposes nothing beyond the host. Its port
// is outside 9100-9999, the range of Prometheus's default port
// allocations for exporters; 9464, the default before, is OpenTelemetry's
// Prometheus exporter's (docs/prometheus.md, "The default port", says
// what was checked).
const defaultListen = "127.0.0.1:19379"

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

// runExporter is the exporter command: it serves at once, makes a first
// reading of Redis (its failure is logged, not fatal: Redis may be down
// or slow at start), says where it serves, and reads Redis on each
// scrape until interrupted.
func runExporter(argv []string, stdout, stderr io.Writer) int {
	var f exporterFlags
	cmd := standalone{name: "exporter", register: f.register, check: f.check, connOnly: true, lazy: true,
		usage: "usage: ratelimiter exporter [--web.listen-address " + defaultListen + " ...] [--web.config.file FILE] [--match PATTERN ...]\n\n" +
			"Serves Prometheus metrics (text or OpenMetrics) of the limiters found by SCAN, read on each scrape,\n" +
			"with " + healthyPath + ", " + readyPath + " and a landing page on /. It starts whether or not Redis answers."}
	return cmd.run(argv, stdout, stderr, func(se session) int {
		redactErr := func(err error) string { return redact(err.Error(), se.g.effectiveURL()) }
		logf := func(format string, args ...any) {
			fmt.Fprintf(stderr, "ratelimiter exporter: %s\n", oneLine(fmt.Sprintf(format, args...)))
		}
		x := &exporter{rdb: se.rdb, f: f, ctx: se.ctx, logf: logf, redact: redactErr}
		// Bind first: an address in use fails before anything else.
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
		h, err := x.handler(se.g.timeout)
		if err != nil {
			return se.fail(2, "%v", err)
		}
		wait := serveAll(se.ctx, lns, h, f.webConfig, stderr)
		if s := x.warmup(); s.c == nil {
			logf("serving anyway, with ratelimiter_exporter_up 0 until a reading succeeds")
		}
		scheme := "http"
		if f.tls {
			scheme = "https"
		}
		for _, ln := range lns {
			fmt.Fprintf(stdout, "serving %s://%s%s\n", scheme, ln.Addr(), f.telemetryPath)
		}
		return wait()
	})
}

// serveAll starts serving h on every listener through exporter-toolkit's
// web package (TLS and basic auth from webConfig) and returns a function
// that waits until ctx is done (exit 0) or a listener fails (exit 2).
// Each listener gets its own http.Server: web.Serve wraps the server's
// handler, so one shared server would be wrapped once per listener,
// concurrently.
func serveAll(ctx context.Context, lns []net.Listener, h http.Handler, webConfig string, stderr io.Writer) (wait func() int) {
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
	return func() int {
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
}

// handler routes the telemetry path, the health endpoints and the landing
// page. The metrics are the process's (Go runtime, process, go_build_info,
// ratelimiter_build_info, scrapes of this handler, from client_golang's
// registry) and the exporter's own,
// written as they are read from the last reading (writeSnapshot), in the
// format the scraper asks for: OpenMetrics or text 0.0.4, gzipped when
// it accepts gzip.
func (x *exporter) handler(redisTimeout time.Duration) (http.Handler, error) {
	reg := prometheus.NewRegistry()
	if err := reg.Register(collectors.NewGoCollector()); err != nil {
		return nil, err
	}
	if err := reg.Register(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})); err != nil {
		return nil, err
	}
	if err := reg.Register(collectors.NewBuildInfoCollector()); err != nil {
		return nil, err
	}
	if err := reg.Register(newBuildInfo()); err != nil {
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
	mux.Handle(x.f.telemetryPath, promhttp.InstrumentMetricHandler(reg, x.metricsHandler(reg)))
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

// metricsHandler serves one scrape: it takes a reading (or shares one,
// see exporter), gathers reg, and writes both.
func (x *exporter) metricsHandler(reg prometheus.Gatherer) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		snap := x.reading(time.Now())
		mfs, err := reg.Gather()
		if err != nil {
			// The process's own series: send what was gathered.
			x.logf("gathering the process's metrics: %v", err)
		}
		format := expfmt.NegotiateAccept(r.Header, expfmt.DefaultOpenMetricsAcceptedFormats()...)
		w.Header().Add("Vary", "Accept")
		w.Header().Add("Vary", "Accept-Encoding")
		w.Header().Set("Content-Type", string(format))
		var out io.Writer = w
		if acceptsGzip(r.Header.Get("Accept-Encoding")) {
			w.Header().Set("Content-Encoding", "gzip")
			gz := gzip.NewWriter(w)
			defer gz.Close()
			out = gz
		}
		bw := bufio.NewWriterSize(out, 64<<10)
		e := &expo{w: bw, om: format.FormatType() == expfmt.TypeOpenMetrics}
		writeSnapshot(e, snap)
		enc := expfmt.NewEncoder(bw, format)
		for _, mf := range mfs {
			if err := enc.Encode(mf); err != nil {
				break
			}
		}
		if closer, ok := enc.(expfmt.Closer); ok {
			_ = closer.Close() // OpenMetrics' "# EOF"
		}
		if err := bw.Flush(); err != nil && r.Context().Err() == nil {
			x.logf("writing the metrics: %v", err)
		}
	})
}

// acceptsGzip reports whether an Accept-Encoding header value accepts
// gzip: "gzip" or "*" listed without q=0.
func acceptsGzip(header string) bool {
	for _, part := range strings.Split(header, ",") {
		coding, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		coding = strings.ToLower(strings.TrimSpace(coding))
		if coding != "gzip" && coding != "*" {
			continue
		}
		q := 1.0
		for _, p := range strings.Split(params, ";") {
			if k, v, ok := strings.Cut(strings.TrimSpace(p), "="); ok && strings.EqualFold(strings.TrimSpace(k), "q") {
				if f, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil {
					q = f
				}
			}
		}
		if q > 0 {
			return true
		}
	}
	return false
}

// exporter reads Redis for the scrapes. Readings run one at a time: a
// scrape that arrives while one runs waits for it, and takes the next
// reading unless one that started after it arrived has finished
// meanwhile (then it gets that reading), so that Redis serves one reading
// at a time and a burst of concurrent scrapes costs at most two: the one
// under way and the next. The reading made at start is the exception: a
// scrape that waited for it takes it, so that a slow Redis at start costs
// a scrape one reading, not two.
type exporter struct {
	rdb    redis.UniversalClient
	f      exporterFlags
	ctx    context.Context // ends with the command; readings stop with it
	logf   func(format string, args ...any)
	redact func(error) string // an error's text without the URL's password

	mu          sync.Mutex // one reading at a time; guards the fields below
	errors      int64
	infoErrors  int64  // readings whose INFO failed
	lastInfoErr string // its last error, logged when it changes
	lastSuccess time.Time
	lastStart   time.Time // when the last reading started
	last        *snapshot // what it produced
	// prevMS is the greatest Redis time of a successful reading: the
	// records stamped before it have been counted. 0 before the first.
	prevMS    int64
	tallies   []tally // of the budgets the last successful reading read, in its order
	uncounted int64   // records counted without their permits (too many in a slice)
}

// tally is what the exporter has counted of one budget's records: how
// many, and their permits.
type tally struct {
	limiter, client  string
	perClient        bool
	records, permits int64
}

// before reports whether budget a comes before budget b in a reading:
// limiters by name (findLimiters), then their budgets by client id
// (clientIDs).
func (a *tally) before(b *tally) bool {
	if a.limiter != b.limiter {
		return a.limiter < b.limiter
	}
	if a.perClient != b.perClient {
		return !a.perClient
	}
	return a.client < b.client
}

// reading returns the reading a scrape that arrived at arrived gets: a
// new one, or one it may share (see exporter).
func (x *exporter) reading(arrived time.Time) *snapshot {
	x.mu.Lock()
	defer x.mu.Unlock()
	if s := x.last; s != nil && (x.lastStart.After(arrived) || s.warmup && arrived.Before(s.end)) {
		return s
	}
	return x.readLocked(false)
}

// warmup makes the reading at start.
func (x *exporter) warmup() *snapshot {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.readLocked(true)
}

// readLocked reads Redis within --collect-timeout and returns the
// snapshot, logging the error that made the reading fail, if any.
func (x *exporter) readLocked(warmup bool) *snapshot {
	start := time.Now()
	x.lastStart = start
	x.last = nil // free the previous reading once the scrapes writing it are done
	ctx, cancel := context.WithTimeout(x.ctx, x.f.collectTimeout)
	defer cancel()
	c, err := x.read(ctx)
	if err == nil {
		x.lastSuccess = time.Now()
	} else {
		x.errors++
		c = nil
		if x.ctx.Err() == nil {
			x.logf("reading Redis: %s", x.redact(err))
		}
	}
	s := &snapshot{c: c, took: time.Since(start), lastSuccess: x.lastSuccess, errors: x.errors, infoErrors: x.infoErrors,
		uncounted: x.uncounted, warmup: warmup, end: time.Now()}
	x.last = s
	return s
}

// read makes one reading at Redis's time.
func (x *exporter) read(ctx context.Context) (*collection, error) {
	c := &collection{}
	t, err := x.rdb.Time(ctx).Result()
	if err != nil {
		return nil, err
	}
	nowMS := t.UnixMilli()
	res, err := findLimiters(ctx, x.rdb, findLimits{patterns: x.f.match, count: x.f.scanCount, maxScans: x.f.maxScans, maxLimiters: x.f.maxLimiters})
	if err != nil {
		return nil, err
	}
	c.truncated = res.truncated
	if ev, err := diag.ReadEviction(ctx, x.rdb); err == nil {
		c.eviction = &ev
	} else if ctx.Err() == nil {
		// Only the eviction series need INFO: the reading goes on, and
		// ratelimiter_exporter_info_errors_total counts the refusal.
		x.infoErrors++
		if msg := x.redact(err); msg != x.lastInfoErr {
			x.logf("reading INFO for the eviction series: %s", msg)
			x.lastInfoErr = msg
		}
	}
	lim := readLimits{count: x.f.scanCount, maxScans: x.f.maxScans, maxClients: x.f.maxClients, maxRecords: x.f.maxRecords}
	// The slice [prevMS, nowMS): the records stamped since the greatest
	// time of a successful reading. None on the first reading, nor while
	// Redis's clock is not past that time (a clock stepped back, or a
	// failover to a server whose clock is behind), so that no record is
	// counted twice.
	fromMS := x.prevMS
	if fromMS >= nowMS {
		fromMS = 0
	}
	if c.limiters, err = readLimiters(ctx, x.rdb, res.limiters, nowMS, fromMS, lim); err != nil {
		return nil, err
	}
	for i := range c.limiters {
		l := &c.limiters[i]
		c.truncated = c.truncated || l.clientsTruncated
		var newest int64
		for _, b := range l.budgets {
			newest = max(newest, b.newestMS)
		}
		if l.ttl < 0 && (newest == 0 || nowMS-newest > x.f.idle.Milliseconds()) {
			c.idle++
		}
	}
	x.count(c)
	x.prevMS = max(x.prevMS, nowMS)
	return c, nil
}

// count adds the records of a successful reading's slice to the tallies
// of the budgets it read (their permits too, unless the slice held more
// records than --max-records: then x.uncounted counts them), sets each
// budget's records and permits, and forgets the budgets it did not read,
// so that memory follows the budgets exported. A budget read again later
// starts from zero: a counter reset, as at the exporter's restart.
// Readings list budgets in one order (tally.before), so the previous
// tallies are matched in one pass; a budget out of that order would only
// start from zero.
func (x *exporter) count(c *collection) {
	n := 0
	for i := range c.limiters {
		n += len(c.limiters[i].budgets)
	}
	prev, next := x.tallies, make([]tally, 0, n)
	for i := range c.limiters {
		l := &c.limiters[i]
		for j := range l.budgets {
			b := &l.budgets[j]
			t := tally{limiter: l.name, client: b.client, perClient: l.cfg.Mode == ratelimiter.PerClient}
			for len(prev) > 0 && prev[0].before(&t) {
				prev = prev[1:]
			}
			if len(prev) > 0 && !t.before(&prev[0]) {
				t.records, t.permits = prev[0].records, prev[0].permits
				prev = prev[1:]
			}
			if b.hasSlice {
				t.records += b.sliceRecords
				if b.hasSlicePermits {
					t.permits += b.slicePermits
				} else {
					x.uncounted += b.sliceRecords
				}
			}
			b.records, b.permits = t.records, t.permits
			next = append(next, t)
		}
	}
	x.tallies = next
}
