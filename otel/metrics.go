// Package ratelimiterotel records OpenTelemetry metrics of the decisions,
// leases and clock measurements of github.com/goredisson/ratelimiter Clients,
// through ratelimiter.Hooks:
//
//	m, err := ratelimiterotel.New(ratelimiterotel.WithMeterProvider(mp))
//	if err != nil { ... }
//	client := ratelimiter.NewClient(rdb, ratelimiter.WithHooks(m.Hooks()))
//
// docs/otel.md ("Metrics") lists every metric with its unit, attributes and meaning.
// Attribute values are bounded: the limiter name can be mapped or left
// out (WithLimiterName, WithoutLimiterName), and at most WithMaxLimiters
// names are recorded.
package ratelimiterotel

import (
	"context"
	"errors"
	"go.opentelemetry.io/otel/trace"
	"runtime/debug"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/goredisson/ratelimiter"
)

// Version returns this module's version as the binary's build info records
// it (v0.1.0, a pseudo-version, or "(devel)" when built inside its own
// repository), or "" when the binary has no build info. It is the
// meter's instrumentation scope version.
func Version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	if bi.Main.Path == ScopeName {
		return bi.Main.Version
	}
	for _, d := range bi.Deps {
		if d.Path == ScopeName {
			if d.Replace != nil {
				return d.Replace.Version
			}
			return d.Version
		}
	}
	return ""
}

// ScopeName is the instrumentation scope of the meter.
const ScopeName = "github.com/goredisson/ratelimiter/otel"

// Attribute keys.
const (
	// AttrLimiter is the limiter's name (after WithLimiterName).
	AttrLimiter = attribute.Key("ratelimiter.name")
	// AttrOperation is "allow", "try_acquire_timeout" or "acquire"
	// (ratelimiter.Op.String).
	AttrOperation = attribute.Key("ratelimiter.operation")
	// AttrOutcome is "granted", "refused" or "error".
	AttrOutcome = attribute.Key("ratelimiter.outcome")
	// AttrErrorType is ratelimiter.ErrorKind of the error.
	AttrErrorType = attribute.Key("error.type")
	// AttrPermits is the permits a traced decision asked for.
	AttrPermits = attribute.Key("ratelimiter.permits")
	// AttrRetryAfter is a traced refusal's wait hint in ms.
	AttrRetryAfter = attribute.Key("ratelimiter.retry_after_ms")
	// AttrLarge says whether a clock measurement found a large skew
	// (ratelimiter.ClockSkew.Large).
	AttrLarge = attribute.Key("ratelimiter.clock.large")
	// AttrLeased is true on a decision granted from the Client's live lease
	// without a Redis call (ratelimiter.Decision.Leased); other decisions
	// do not carry it.
	AttrLeased = attribute.Key("ratelimiter.leased")
	// AttrDegraded is true on a decision that the Client made by its local
	// window while Redis was unreachable (ratelimiter.WithOutageFallback,
	// ratelimiter.Decision.Degraded); other decisions do not carry it.
	AttrDegraded = attribute.Key("ratelimiter.degraded")
	// AttrLeaseOutcome is where an ended lease's permits went: "handed_out",
	// "returned" or "kept" (ratelimiter.LeaseEvent.HandedOut, Returned, Kept).
	AttrLeaseOutcome = attribute.Key("ratelimiter.lease.outcome")
	// AttrLeaseEnd is how a lease ended (ratelimiter.LeaseEnd.String:
	// "exhausted", "expired", "replaced", "dropped", "closed", "refused"),
	// or "other" for a LeaseEnd this module does not know.
	AttrLeaseEnd = attribute.Key("ratelimiter.lease.end")
)

// Bucket boundaries in seconds: Redis round trips from 100 µs, waits up to
// a minute.
var (
	redisBuckets = []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5}
	waitBuckets  = []float64{0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}
	batchBuckets = []float64{1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 4096}
)

// Metrics holds the instruments. Its hooks are safe for concurrent use
// and may be installed on any number of Clients.
type Metrics struct {
	decisions    metric.Int64Counter
	permits      metric.Int64Counter
	errs         metric.Int64Counter
	wait         metric.Float64Histogram
	redis        metric.Float64Histogram
	batch        metric.Int64Histogram
	measurements metric.Int64Counter
	waiters      metric.Int64UpDownCounter
	requests     metric.Int64Counter
	leasePermits metric.Int64Counter
	leases       metric.Int64Counter
	tracer       trace.Tracer
	names        *names
	offsetNS     atomic.Int64
	hasOffset    atomic.Bool
}

// New creates the instruments on the configured MeterProvider's meter
// ScopeName. It fails when an option is invalid (nil provider or mapper,
// WithMaxLimiters below 1) or when the provider refuses an instrument.
func New(opts ...Option) (*Metrics, error) {
	cfg := newConfig(opts)
	switch {
	case cfg.provider == nil:
		return nil, errors.New("ratelimiterotel: nil MeterProvider")
	case cfg.tracers == nil:
		return nil, errors.New("ratelimiterotel: nil TracerProvider")
	case cfg.mapName == nil:
		return nil, errors.New("ratelimiterotel: nil limiter name mapper")
	case cfg.maxLimiters < 1:
		return nil, errors.New("ratelimiterotel: WithMaxLimiters below 1")
	}
	meter := cfg.provider.Meter(ScopeName, metric.WithInstrumentationVersion(Version()))
	m := &Metrics{names: newNames(cfg.mapName, cfg.maxLimiters),
		tracer: cfg.tracers.Tracer(ScopeName, trace.WithInstrumentationVersion(Version()))}
	var err error
	add := func(e error) { err = errors.Join(err, e) }
	var e error
	m.decisions, e = meter.Int64Counter("ratelimiter.decisions", metric.WithUnit("{decision}"),
		metric.WithDescription("Acquisitions that ended, by limiter, operation and outcome."))
	add(e)
	m.permits, e = meter.Int64Counter("ratelimiter.permits.granted", metric.WithUnit("{permit}"),
		metric.WithDescription("Permits taken by granted acquisitions."))
	add(e)
	m.errs, e = meter.Int64Counter("ratelimiter.errors", metric.WithUnit("{error}"),
		metric.WithDescription("Acquisitions that ended with an error, by error.type."))
	add(e)
	m.wait, e = meter.Float64Histogram("ratelimiter.wait.duration", metric.WithUnit("s"),
		metric.WithDescription("Time blocking acquisitions (Acquire, TryAcquireTimeout) spent waiting for permits."),
		metric.WithExplicitBucketBoundaries(waitBuckets...))
	add(e)
	m.redis, e = meter.Float64Histogram("ratelimiter.redis.duration", metric.WithUnit("s"),
		metric.WithDescription("Round trip of the script call that decided an acquisition, as the client saw it."),
		metric.WithExplicitBucketBoundaries(redisBuckets...))
	add(e)
	m.batch, e = meter.Int64Histogram("ratelimiter.batch.size", metric.WithUnit("{acquisition}"),
		metric.WithDescription("Acquisitions decided by the script call that decided an acquisition (combining)."),
		metric.WithExplicitBucketBoundaries(batchBuckets...))
	add(e)
	m.measurements, e = meter.Int64Counter("ratelimiter.clock.measurements", metric.WithUnit("{measurement}"),
		metric.WithDescription("Measurements of a client's clock against Redis TIME, by whether the skew was large, or error.type."))
	add(e)
	m.waiters, e = meter.Int64UpDownCounter("ratelimiter.waiters", metric.WithUnit("{waiter}"),
		metric.WithDescription("Blocking acquisitions (Acquire, TryAcquireTimeout) in progress: callers queued for permits."))
	add(e)
	m.requests, e = meter.Int64Counter("ratelimiter.requests", metric.WithUnit("{request}"),
		metric.WithDescription("Requests a middleware decided, by policy and result (acquired, limited): aspnetcore.rate_limiting.requests' shape."))
	add(e)
	m.leasePermits, e = meter.Int64Counter("ratelimiter.lease.permits", metric.WithUnit("{permit}"),
		metric.WithDescription("Permits of ended leases, by where they went: handed out to callers, returned to Redis, or kept until their record expires."))
	add(e)
	m.leases, e = meter.Int64Counter("ratelimiter.leases", metric.WithUnit("{lease}"),
		metric.WithDescription("Leases that ended, by how they ended."))
	add(e)
	_, e = meter.Float64ObservableGauge("ratelimiter.clock.offset", metric.WithUnit("s"),
		metric.WithDescription("Client clock minus Redis TIME at the last successful measurement; positive: the client is ahead."),
		metric.WithFloat64Callback(m.observeOffset))
	add(e)
	if err != nil {
		return nil, err
	}
	return m, nil
}

// Hooks returns the hooks that record the metrics, for ratelimiter.WithHooks.
func (m *Metrics) Hooks() ratelimiter.Hooks {
	return ratelimiter.Hooks{Decision: m.Decision, ClockSkew: m.ClockSkew, Waiting: m.Waiting, DecisionContext: m.Trace, Lease: m.Lease}
}

// Trace records a decision on the caller's span, when that span is
// recording: an event "ratelimiter.decision" (limiter, operation, outcome,
// permits, and the hint of a refusal in ms), and for a blocking call that
// waited, a child span "ratelimiter.wait" over the wait. Without a
// recording span it does nothing and allocates nothing. It is the
// DecisionContext hook.
func (m *Metrics) Trace(ctx context.Context, d ratelimiter.Decision) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	a := m.names.get(d.Limiter)
	attrs := a.decided(opIndex(d.Op), d).attrs
	ev := append(append(make([]attribute.KeyValue, 0, len(attrs)+2), attrs...), AttrPermits.Int64(d.Permits))
	if !d.Granted && d.RetryAfter > 0 {
		ev = append(ev, AttrRetryAfter.Int64(d.RetryAfter.Milliseconds()))
	}
	span.AddEvent("ratelimiter.decision", trace.WithAttributes(ev...))
	if d.Op != ratelimiter.OpAllow && d.Waited > 0 {
		end := time.Now()
		_, w := m.tracer.Start(ctx, "ratelimiter.wait", trace.WithTimestamp(end.Add(-d.Waited)), trace.WithAttributes(ev...))
		w.End(trace.WithTimestamp(end))
	}
}

// Waiting counts a blocking acquisition in (+1) or out (-1) of
// ratelimiter.waiters; it is the Waiting hook.
func (m *Metrics) Waiting(limiter string, delta int) {
	m.waiters.Add(context.Background(), int64(delta), m.names.get(limiter).limiter.add...)
}

// Decision records one acquisition; it is the Decision hook.
func (m *Metrics) Decision(d ratelimiter.Decision) {
	ctx := context.Background()
	a := m.names.get(d.Limiter)
	op := opIndex(d.Op)
	dec := &a.decision[op][outcome(d)]
	m.decisions.Add(ctx, 1, a.decided(op, d).add...)
	if d.Granted {
		m.permits.Add(ctx, d.Permits, a.op[op].add...)
	}
	if d.Op != ratelimiter.OpAllow {
		m.wait.Record(ctx, d.Waited.Seconds(), dec.rec...)
	}
	if d.RoundTrip > 0 {
		m.redis.Record(ctx, d.RoundTrip.Seconds(), a.limiter.rec...)
		m.batch.Record(ctx, int64(d.Batch), a.limiter.rec...)
	}
	if d.Err != nil {
		kv := append(make([]attribute.KeyValue, 0, len(a.op[op].attrs)+1), a.op[op].attrs...)
		m.errs.Add(ctx, 1, metric.WithAttributeSet(attribute.NewSet(append(kv, AttrErrorType.String(ratelimiter.ErrorKind(d.Err)))...)))
	}
}

// Lease records one ended lease (ratelimiter.WithLeases): its permits by
// where they went on ratelimiter.lease.permits (handed_out, returned,
// kept; they add up to LeaseEvent.Permits) and the lease by how it ended
// on ratelimiter.leases. An event whose return failed (Err set) counts
// the same way: the permits that did not come back are kept. It is the
// Lease hook.
func (m *Metrics) Lease(ev ratelimiter.LeaseEvent) {
	ctx := context.Background()
	a := m.names.get(ev.Limiter)
	m.leases.Add(ctx, 1, a.leaseEnd[endIndex(ev.End)].add...)
	for i, n := range [len(leaseOutcomes)]int64{ev.HandedOut, ev.Returned, ev.Kept} {
		m.leasePermits.Add(ctx, n, a.leasePermits[i].add...)
	}
}

// ClockSkew records one clock measurement; it is the ClockSkew hook.
func (m *Metrics) ClockSkew(s ratelimiter.ClockSkew) {
	ctx := context.Background()
	if s.Err != nil {
		m.measurements.Add(ctx, 1, metric.WithAttributes(AttrErrorType.String(ratelimiter.ErrorKind(s.Err))))
		return
	}
	m.offsetNS.Store(int64(s.Offset))
	m.hasOffset.Store(true)
	if s.Large {
		m.measurements.Add(ctx, 1, largeTrue...)
	} else {
		m.measurements.Add(ctx, 1, largeFalse...)
	}
}

var (
	largeTrue  = []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(AttrLarge.Bool(true)))}
	largeFalse = []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(AttrLarge.Bool(false)))}
)

func (m *Metrics) observeOffset(_ context.Context, o metric.Float64Observer) error {
	if m.hasOffset.Load() {
		o.Observe(float64(m.offsetNS.Load()) / 1e9)
	}
	return nil
}

// outcome is d's outcome index: outError, outRefused or outGranted.
func outcome(d ratelimiter.Decision) int {
	switch {
	case d.Err != nil:
		return outError
	case !d.Granted:
		return outRefused
	}
	return outGranted
}

// opIndex maps an Op to 0..3; 0 holds any Op the library does not make.
func opIndex(op ratelimiter.Op) int {
	if op >= ratelimiter.OpAllow && op <= ratelimiter.OpAcquire {
		return int(op)
	}
	return 0
}

// endIndex maps a LeaseEnd to its index in leaseEnds; 0 holds any
// LeaseEnd the library did not have when this module was built.
func endIndex(e ratelimiter.LeaseEnd) int {
	if e >= ratelimiter.LeaseExhausted && int(e) < len(leaseEnds) {
		return int(e)
	}
	return 0
}
