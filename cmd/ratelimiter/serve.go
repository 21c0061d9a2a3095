package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/goredisson/ratelimiter"
)

func init() {
	commands["serve"] = command{"serve Envoy's rate-limit service API (gRPC and /json) on Redisson limiters, from Envoy's ratelimit config files", runServe}
}

// serveFlags are serve's own flags.
type serveFlags struct {
	configs            []string // --config, repeated
	grpcListen         string
	httpListen         string
	tlsCert, tlsKey    string
	tlsClientCA        string
	failureMode        string
	refuseUnconfigured bool
	decisionTimeout    time.Duration
	keepAlive          time.Duration
	configPoll         time.Duration
	shutdownTimeout    time.Duration
	shutdownDrain      time.Duration

	initial *rlsConfig  // the configuration, read by check
	stamp   string      // configStamp of the files before check read them
	certs   *certHolder // the TLS certificate, read by check; nil without TLS
	tlsConf *tls.Config // for both listeners; nil without TLS
}

// Envoy's rate-limit service listens on 8081 (gRPC) and 8080 (HTTP) on
// every interface; serve takes the same ports on loopback, so that a bare
// "ratelimiter serve" exposes nothing beyond the host.
const (
	defaultGRPCListen = "127.0.0.1:8081"
	defaultHTTPListen = "127.0.0.1:8080"
)

// defaultShutdownDrain is how long serve keeps answering with health at
// NOT_SERVING before it closes its listeners: a few of the health-check
// intervals of load balancers and Envoy's active health checks (often 1
// to 5 s), so that they stop sending first.
const defaultShutdownDrain = 5 * time.Second

func (f *serveFlags) register(fs *flag.FlagSet) {
	fs.Func("config", "Envoy ratelimit configuration: a YAML file, or a directory whose *.yaml and *.yml files are read; repeat for several (required)", func(s string) error {
		if s == "" {
			return errors.New("empty path")
		}
		f.configs = append(f.configs, s)
		return nil
	})
	fs.StringVar(&f.grpcListen, "grpc-listen", defaultGRPCListen, "address of the gRPC API (envoy.service.ratelimit.v3.RateLimitService and grpc.health.v1.Health), host:port")
	fs.StringVar(&f.httpListen, "http-listen", defaultHTTPListen, "address of the HTTP API (POST /json, /metrics, /healthcheck), host:port; empty for none")
	fs.StringVar(&f.tlsCert, "tls-cert", "", "PEM certificate (chain) for TLS on both listeners; with --tls-key; re-read on SIGHUP")
	fs.StringVar(&f.tlsKey, "tls-key", "", "PEM private key of --tls-cert")
	fs.StringVar(&f.tlsClientCA, "tls-client-ca", "", "PEM CA certificates: require client certificates signed by them (mutual TLS); needs --tls-cert")
	fs.StringVar(&f.failureMode, "failure-mode", "allow", "answer for a descriptor whose limiter Redis does not decide in time: allow (OK) or deny (OVER_LIMIT)")
	fs.BoolVar(&f.refuseUnconfigured, "refuse-unconfigured", false, "answer OVER_LIMIT for a descriptor that matches no rate_limit (Envoy's service answers OK)")
	fs.DurationVar(&f.decisionTimeout, "decision-timeout", time.Second, "most time a request waits for Redis; a caller's earlier deadline (Envoy's filter timeout) bounds it too")
	fs.DurationVar(&f.keepAlive, "keep-alive", 24*time.Hour, "KeepAlive of the limiters serve sets up, at least their interval: one unused that long is deleted; 0 keeps them for ever")
	fs.DurationVar(&f.configPoll, "config-poll", 5*time.Second, "how often to check the config files for changes (size, time, names) and reload them; 0 for SIGHUP only")
	fs.DurationVar(&f.shutdownTimeout, "shutdown-timeout", 10*time.Second, "on SIGTERM or SIGINT, how long in-flight requests may take before the listeners close (after --shutdown-drain)")
	fs.DurationVar(&f.shutdownDrain, "shutdown-drain", defaultShutdownDrain, "on SIGTERM or SIGINT, how long health reports NOT_SERVING while requests are still served, before the listeners close; 0 for none; a second signal ends it")
}

// check validates the flags and reads the configuration and the TLS
// files, so that a bad file is a usage error before anything else.
func (f *serveFlags) check() error {
	switch {
	case len(f.configs) == 0:
		return usagef("--config is required: an Envoy ratelimit configuration file or directory")
	case f.failureMode != "allow" && f.failureMode != "deny":
		return usagef("--failure-mode must be allow or deny, not %q", f.failureMode)
	case f.decisionTimeout <= 0:
		return usagef("--decision-timeout must be positive")
	case f.keepAlive < 0 || f.keepAlive%time.Millisecond != 0:
		return usagef("--keep-alive must be 0 or a positive whole number of milliseconds")
	case f.configPoll < 0:
		return usagef("--config-poll must not be negative")
	case f.shutdownTimeout < 0:
		return usagef("--shutdown-timeout must not be negative")
	case f.shutdownDrain < 0:
		return usagef("--shutdown-drain must not be negative")
	case (f.tlsCert == "") != (f.tlsKey == ""):
		return usagef("--tls-cert and --tls-key go together")
	case f.tlsClientCA != "" && f.tlsCert == "":
		return usagef("--tls-client-ca needs --tls-cert and --tls-key")
	}
	if _, _, err := net.SplitHostPort(f.grpcListen); err != nil {
		return usagef("--grpc-listen must be host:port: %v", err)
	}
	if f.httpListen != "" {
		if _, _, err := net.SplitHostPort(f.httpListen); err != nil {
			return usagef("--http-listen must be host:port or empty: %v", err)
		}
	}
	// The stamp before the reading: a change made while it reads is
	// seen by the first poll.
	f.stamp = configStamp(f.configs)
	cfg, err := loadRLSConfig(f.configs)
	if err != nil {
		return usagef("--config: %v", err)
	}
	f.initial = cfg
	if f.tlsCert != "" {
		f.certs = &certHolder{certFile: f.tlsCert, keyFile: f.tlsKey}
		if err := f.certs.load(); err != nil {
			return usagef("--tls-cert: %v", err)
		}
		f.tlsConf = &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: f.certs.get}
		if f.tlsClientCA != "" {
			pem, err := os.ReadFile(f.tlsClientCA)
			if err != nil {
				return usagef("--tls-client-ca: %v", err)
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return usagef("--tls-client-ca %s holds no PEM certificate", f.tlsClientCA)
			}
			f.tlsConf.ClientCAs, f.tlsConf.ClientAuth = pool, tls.RequireAndVerifyClientCert
		}
	}
	return nil
}

// certHolder is the TLS certificate, swapped whole when SIGHUP re-reads
// it, so that a renewed certificate is served without a restart.
type certHolder struct {
	certFile, keyFile string
	cert              atomic.Pointer[tls.Certificate]
}

func (h *certHolder) load() error {
	c, err := tls.LoadX509KeyPair(h.certFile, h.keyFile)
	if err != nil {
		return err
	}
	h.cert.Store(&c)
	return nil
}

func (h *certHolder) get(*tls.ClientHelloInfo) (*tls.Certificate, error) { return h.cert.Load(), nil }

// serveMetrics are serve's own series, beside the process's.
type serveMetrics struct {
	decisions *prometheus.CounterVec
	latency   *prometheus.HistogramVec
	shadow    *prometheus.CounterVec
	failures  *prometheus.CounterVec
	reloads   *prometheus.CounterVec
	configOK  prometheus.Gauge
}

func newServeMetrics(reg prometheus.Registerer) *serveMetrics {
	m := &serveMetrics{
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ratelimiter_serve_decisions_total",
			Help: "Requests decided, by domain (\"(unknown)\" for a domain no file configures) and overall code (OK or OVER_LIMIT).",
		}, []string{"domain", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "ratelimiter_serve_decision_duration_seconds",
			Help: "Time to decide a request, Redis calls included, by API (grpc or json).",
			// Envoy's filter waits 20 ms by default: the buckets are fine
			// below it.
			Buckets: []float64{.0005, .001, .002, .005, .01, .02, .05, .1, .25, .5, 1},
		}, []string{"api"}),
		shadow: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ratelimiter_serve_shadow_mode_total",
			Help: "Descriptors over their limit that shadow_mode answered OK, by domain.",
		}, []string{"domain"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ratelimiter_serve_redis_failures_total",
			Help: "Descriptors that --failure-mode answered because Redis failed or did not answer in time, by domain.",
		}, []string{"domain"}),
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ratelimiter_serve_config_reloads_total",
			Help: "Configuration reloads (SIGHUP or a change seen by --config-poll), by result (success or failure; a failure keeps the previous configuration).",
		}, []string{"result"}),
		configOK: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "ratelimiter_serve_config_last_reload_successful",
			Help: "1 when the last reading of the configuration succeeded, 0 when it failed and the previous one is in use.",
		}),
	}
	reg.MustRegister(m.decisions, m.latency, m.shadow, m.failures, m.reloads, m.configOK)
	m.configOK.Set(1)
	return m
}

// runServe is the serve command: it binds both listeners, says where it
// serves, and answers until SIGTERM or SIGINT, reloading the
// configuration on SIGHUP and when --config-poll sees the files change.
// It starts whether or not Redis answers: until it does, --failure-mode
// answers.
func runServe(argv []string, stdout, stderr io.Writer) int {
	var f serveFlags
	cmd := standalone{name: "serve", register: f.register, check: f.check, connOnly: true, withClient: true, lazy: true,
		usage: "usage: ratelimiter serve --config FILE|DIR [--grpc-listen " + defaultGRPCListen + "] [--http-listen " + defaultHTTPListen + "]\n\n" +
			"Serves Envoy's rate-limit service API (envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit over\n" +
			"gRPC, and POST /json) from Envoy ratelimit configuration files. Each descriptor's limit is a Redisson\n" +
			"limiter named domain:key_value:key2_value2 (docs/service.md). SIGHUP reloads the configuration (and\n" +
			"the TLS certificate); a bad file is refused and the previous configuration kept."}
	return cmd.run(argv, stdout, stderr, func(se session) int {
		var logMu sync.Mutex
		logf := func(format string, args ...any) {
			logMu.Lock()
			defer logMu.Unlock()
			fmt.Fprintf(stderr, "ratelimiter serve: %s\n", oneLine(redact(fmt.Sprintf(format, args...), se.g.effectiveURL())))
		}
		// Signals first: a SIGHUP that comes once "serving" is printed
		// must reload, not end the process.
		hup := make(chan os.Signal, 1)
		signal.Notify(hup, syscall.SIGHUP)
		defer signal.Stop(hup)
		// SIGTERM and SIGINT end the session's context (the first one)
		// and land here too: a second one during the drain ends it.
		term := make(chan os.Signal, 2)
		signal.Notify(term, syscall.SIGTERM, os.Interrupt)
		defer signal.Stop(term)

		grpcLn, err := net.Listen("tcp", f.grpcListen)
		if err != nil {
			return se.fail(2, "%v", err)
		}
		defer grpcLn.Close()
		var httpLn net.Listener
		if f.httpListen != "" {
			if httpLn, err = net.Listen("tcp", f.httpListen); err != nil {
				return se.fail(2, "%v", err)
			}
			defer httpLn.Close()
		}

		reg := prometheus.NewRegistry()
		reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
			collectors.NewBuildInfoCollector(), newBuildInfo())
		metrics := newServeMetrics(reg)
		svc := &rlsService{
			client:             ratelimiter.NewClient(se.rdb, se.g.clientOptions()...),
			failDeny:           f.failureMode == "deny",
			refuseUnconfigured: f.refuseUnconfigured,
			decisionTimeout:    f.decisionTimeout,
			keepAlive:          f.keepAlive,
			metrics:            metrics,
			logf:               throttled(logf, time.Second),
		}
		svc.cfg.Store(f.initial)
		logf("configuration: %s", describeConfig(f.initial))

		var opts []grpc.ServerOption
		if f.tlsConf != nil {
			opts = append(opts, grpc.Creds(credentials.NewTLS(f.tlsConf)))
		}
		gs := grpc.NewServer(opts...)
		rlspb.RegisterRateLimitServiceServer(gs, svc)
		hs := health.NewServer()
		healthpb.RegisterHealthServer(gs, hs)
		var stopping atomic.Bool
		done := make(chan error, 2)
		go func() { done <- gs.Serve(grpcLn) }()

		var hsrv *http.Server
		scheme := "http"
		if httpLn != nil {
			mux := http.NewServeMux()
			mux.Handle("/json", jsonHandler(svc))
			mux.Handle("/metrics", promhttp.InstrumentMetricHandler(reg, promhttp.HandlerFor(reg, promhttp.HandlerOpts{})))
			mux.HandleFunc("/healthcheck", func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", "text/plain; charset=utf-8")
				if stopping.Load() {
					w.WriteHeader(http.StatusServiceUnavailable)
					_, _ = io.WriteString(w, "shutting down\n")
					return
				}
				_, _ = io.WriteString(w, "OK\n")
			})
			hsrv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second, TLSConfig: f.tlsConf}
			if f.tlsConf != nil {
				scheme = "https"
			}
			go func() {
				if f.tlsConf != nil {
					done <- hsrv.ServeTLS(httpLn, "", "")
				} else {
					done <- hsrv.Serve(httpLn)
				}
			}()
		}
		fmt.Fprintf(stdout, "serving grpc %s\n", grpcLn.Addr())
		if httpLn != nil {
			fmt.Fprintf(stdout, "serving http %s://%s\n", scheme, httpLn.Addr())
		}

		reload := func(why string) {
			if f.certs != nil {
				if err := f.certs.load(); err != nil {
					logf("reload (%s): TLS certificate refused, keeping the previous one: %v", why, err)
				}
			}
			cfg, err := loadRLSConfig(f.configs)
			if err != nil {
				metrics.reloads.WithLabelValues("failure").Inc()
				metrics.configOK.Set(0)
				logf("reload (%s): configuration refused, keeping the previous one: %v", why, err)
				return
			}
			svc.cfg.Store(cfg)
			metrics.reloads.WithLabelValues("success").Inc()
			metrics.configOK.Set(1)
			logf("reload (%s): configuration: %s", why, describeConfig(cfg))
		}
		var poll <-chan time.Time
		if f.configPoll > 0 {
			t := time.NewTicker(f.configPoll)
			defer t.Stop()
			poll = t.C
		}
		seen := f.stamp
		for {
			select {
			case <-hup:
				seen = configStamp(f.configs)
				reload("SIGHUP")
			case <-poll:
				if now := configStamp(f.configs); now != seen {
					seen = now
					reload("files changed")
				}
			case err := <-done:
				logf("%v", err)
				gs.Stop()
				if hsrv != nil {
					_ = hsrv.Close()
				}
				return 2
			case <-se.ctx.Done():
				// Health says NOT_SERVING first and requests are still
				// answered for --shutdown-drain, so that load balancers
				// see it and stop sending before the listeners close;
				// then in-flight requests finish.
				stopping.Store(true)
				hs.Shutdown()
				if f.shutdownDrain > 0 {
					logf("shutting down: health NOT_SERVING, still answering for %v (--shutdown-drain)", f.shutdownDrain)
					drain(term, f.shutdownDrain)
				}
				shutdown(gs, hsrv, f.shutdownTimeout)
				return 0
			}
		}
	})
}

// drain waits d, or until the second SIGTERM or SIGINT on term (the
// first is the one that started the shutdown).
func drain(term <-chan os.Signal, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	for n := 0; ; {
		select {
		case <-t.C:
			return
		case <-term:
			if n++; n >= 2 {
				return
			}
		}
	}
}

// shutdown stops both servers, letting in-flight requests finish within
// timeout, then closes what is left.
func shutdown(gs *grpc.Server, hsrv *http.Server, timeout time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		stopped := make(chan struct{})
		go func() { gs.GracefulStop(); close(stopped) }()
		select {
		case <-stopped:
		case <-ctx.Done():
			gs.Stop()
		}
	}()
	if hsrv != nil {
		if err := hsrv.Shutdown(ctx); err != nil {
			_ = hsrv.Close()
		}
	}
	wg.Wait()
}

// jsonHandler is Envoy's service's POST /json: a RateLimitRequest in
// protobuf's JSON mapping in, the RateLimitResponse out, with status 200
// for OK and 429 for OVER_LIMIT; 400 for a body that is not a request.
func jsonHandler(svc *rlsService) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			http.Error(w, "POST a RateLimitRequest as JSON", http.StatusMethodNotAllowed)
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var req rlspb.RateLimitRequest
		if err := protojson.Unmarshal(body, &req); err != nil {
			http.Error(w, "not a RateLimitRequest: "+err.Error(), http.StatusBadRequest)
			return
		}
		resp, err := svc.decide(r.Context(), &req, "json")
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		out, err := protojson.Marshal(resp)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		if resp.OverallCode == rlspb.RateLimitResponse_OVER_LIMIT {
			w.WriteHeader(http.StatusTooManyRequests)
		}
		_, _ = w.Write(out)
	})
}

// describeConfig says what a configuration holds, for the log.
func describeConfig(c *rlsConfig) string {
	names := make([]string, 0, len(c.domains))
	for d := range c.domains {
		names = append(names, d)
	}
	slices.Sort(names)
	return fmt.Sprintf("%d domains (%s), %d rate_limit blocks", len(names), strings.Join(names, ", "), c.limits)
}

// configStamp is what --config-poll compares: each file's name, size and
// modification time (through symlinks, so that a Kubernetes ConfigMap's
// swap counts), or the error that listing them gave.
func configStamp(paths []string) string {
	files, err := configFiles(paths)
	if err != nil {
		return "error: " + err.Error()
	}
	var b strings.Builder
	for _, f := range files {
		st, err := os.Stat(f)
		if err != nil {
			fmt.Fprintf(&b, "%s: %v\n", f, err)
			continue
		}
		fmt.Fprintf(&b, "%s %d %d\n", f, st.Size(), st.ModTime().UnixNano())
	}
	return b.String()
}

// throttled returns logf limited to one line per every: a Redis that is
// down fails every request, and one line per request would flood the
// log. The next line says how many were left out.
func throttled(logf func(string, ...any), every time.Duration) func(string, ...any) {
	var mu sync.Mutex
	var last time.Time
	dropped := 0
	return func(format string, args ...any) {
		mu.Lock()
		now := time.Now()
		if now.Sub(last) < every {
			dropped++
			mu.Unlock()
			return
		}
		last = now
		n := dropped
		dropped = 0
		mu.Unlock()
		if n > 0 {
			format += fmt.Sprintf(" (and %d more since the last line)", n)
		}
		logf(format, args...)
	}
}
