package ratelimiter

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/goredisson/ratelimiter/internal/script"
)

// Clock skew. Redisson stamps permit records with its JVM's clock and
// decides by it which records have left the window: a writer whose clock
// is ahead by d sees the others' records expire d early and takes their
// permits again. This library stamps by Redis's clock unless made with
// WithServerClock(false) (clock.go), so its own offset then moves nothing;
// a Java service on the same host, or under the same time service, is off
// by about as much. A Client therefore compares its clock with Redis's
// TIME, the one clock every client reaches: once at its first acquisition
// that reaches Redis, then every few minutes, always in a background
// goroutine (at most one at a time), so that no acquisition waits for it.

// defaultClockCheck is how often a Client measures its clock against
// Redis after the first measurement, unless WithClockCheck says
// otherwise.
const defaultClockCheck = 5 * time.Minute

// skewRetry is the wait before the next automatic measurement after a
// failed one, when shorter than the period.
const skewRetry = 30 * time.Second

// skewSamples is the number of TIME round trips per measurement; the
// fastest gives the estimate.
const skewSamples = 3

// skewTimeout bounds one automatic measurement.
const skewTimeout = 5 * time.Second

// maxSkewNames bounds the limiter names a Client remembers to learn the
// intervals it serves.
const maxSkewNames = 64

// largeSkewFraction defines a large skew (ClockSkew.Large): |Offset| at
// least the shortest interval served divided by this. A client ahead by d
// takes again the permits of records written in the last d of the window,
// so a window can hold more than the rate; docs/operations.md ("Clock
// skew") has what offsets of a tenth of the interval and more let through,
// and the benchmark that measures it.
const largeSkewFraction = 10

// ClockSkew is one measurement of a Client's clock against Redis.
type ClockSkew struct {
	// Offset is the Client's clock (WithClock; time.Now by default) minus
	// Redis's TIME, taken at the middle of the fastest of three TIME
	// round trips: positive when the Client's clock is ahead.
	Offset time.Duration
	// Uncertainty is half that round trip: the offset lies within Offset
	// ± Uncertainty.
	Uncertainty time.Duration
	// Interval is the shortest interval among the limiters this Client
	// has acquired from (the first 64 names it used), read from Redis with
	// the measurement; 0 when none is known.
	Interval time.Duration
	// Large reports that Interval is known and |Offset| is at least a
	// tenth of Interval.
	Large bool
	// At is when the measurement was taken, by the Client's clock.
	At time.Time
	// Err is why the measurement failed, or nil; the other fields are
	// then zero.
	Err error
}

// skewState is a Client's clock measurement state. Its zero value has a
// measurement due.
type skewState struct {
	every  time.Duration // WithClockCheck
	idle   atomic.Bool   // no automatic measurement is due or running
	names  sync.Map      // limiter names acquired from: string -> struct{}
	nNames atomic.Int32
	mu     sync.Mutex
	last   ClockSkew // the last successful measurement
	has    bool
}

// tick runs on every decision: it remembers the limiter's name and starts
// a measurement in the background when one is due. It costs two atomic
// loads (and one sync.Map lookup for the first 64 names) when nothing is
// due, and never waits for Redis.
func (s *skewState) tick(c *Client, d *Decision, names []string) {
	if d.RoundTrip == 0 {
		return // nothing reached Redis
	}
	if s.nNames.Load() < maxSkewNames {
		if len(names) == 0 {
			s.remember(d.Limiter)
		}
		for _, n := range names {
			s.remember(n)
		}
	}
	if s.idle.Load() || s.every < 0 {
		return
	}
	if s.idle.CompareAndSwap(false, true) {
		go s.background(c)
	}
}

func (s *skewState) remember(name string) {
	if _, ok := s.names.Load(name); ok {
		return
	}
	if s.nNames.Add(1) <= maxSkewNames {
		s.names.Store(name, struct{}{})
	}
}

// background measures, reports, and makes the next measurement due after
// the period (sooner after a failure).
func (s *skewState) background(c *Client) {
	ctx, cancel := context.WithTimeout(context.Background(), skewTimeout)
	m := c.measure(ctx)
	cancel()
	next := s.every
	if next == 0 {
		next = defaultClockCheck
	}
	if m.Err != nil {
		next = min(next, skewRetry)
	}
	time.AfterFunc(next, func() { s.idle.Store(false) })
}

// lastClockSkew returns the last successful measurement and true, or the
// zero ClockSkew and false before the first one.
func (c *Client) lastClockSkew() (ClockSkew, bool) {
	c.skew.mu.Lock()
	defer c.skew.mu.Unlock()
	return c.skew.last, c.skew.has
}

// MeasureClock measures this Client's clock against Redis's TIME now
// (three round trips, and one pipeline reading the intervals of the
// limiters it has used), records the result, reports it
// to the ClockSkew hook and returns it. It fails with the Client's
// construction error, with Redis's error, or with ctx's when ctx is done
// first; the failure is reported to the hook too.
func (c *Client) MeasureClock(ctx context.Context) (ClockSkew, error) {
	m := c.measure(ctx)
	return m, m.Err
}

// measure takes, records and reports one measurement.
func (c *Client) measure(ctx context.Context) ClockSkew {
	m := c.takeSkew(ctx)
	if m.Err == nil {
		c.skew.mu.Lock()
		c.skew.last, c.skew.has = m, true
		c.skew.mu.Unlock()
	}
	if c.hooks.ClockSkew != nil {
		c.hooks.ClockSkew(m)
	}
	return m
}

func (c *Client) takeSkew(ctx context.Context) ClockSkew {
	if c.err != nil {
		return ClockSkew{Err: c.err}
	}
	var keys []string
	c.skew.names.Range(func(k, _ any) bool {
		name := k.(string)
		if c.mapName != nil {
			name = c.mapName(name)
		}
		keys = append(keys, name)
		return true
	})
	interval, err := script.Bounded(ctx, func() (time.Duration, error) { return c.conn.ShortestInterval(ctx, keys) })
	if err != nil {
		return ClockSkew{Err: c.conn.Result(err)}
	}
	t, err := script.Bounded(ctx, func() (script.TimeSample, error) { return c.conn.SampleTime(ctx, skewSamples) })
	if err != nil {
		return ClockSkew{Err: c.conn.Result(err)}
	}
	m := ClockSkew{Offset: t.Offset, Uncertainty: t.Uncertainty, At: t.At, Interval: interval}
	m.Large = interval > 0 && m.Offset.Abs() >= interval/largeSkewFraction
	return m
}
