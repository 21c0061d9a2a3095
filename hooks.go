package ratelimiter

import (
	"context"
	"errors"
	"strconv"
	"time"
)

// Hooks observe what a Client does, for metrics and logs. Every field may
// be nil. The functions are called synchronously and possibly
// concurrently, from the goroutine of the call they report on or from the
// goroutine that ran its script call: they must be safe for concurrent use,
// fast, and must not block or call back into the Client.
type Hooks struct {
	// Decision is called once when an acquisition (Allow, TryAcquire,
	// TryAcquireTimeout, Acquire) returns, whatever its outcome.
	Decision func(Decision)
	// DecisionContext is Decision with the caller's context, called after
	// Decision from the caller's goroutine: for tracing (an event on the
	// caller's span, a span for a wait). Nil costs nothing.
	DecisionContext func(ctx context.Context, d Decision)
	// ClockSkew is called after every measurement of this Client's clock
	// against Redis (clock_skew.go), failed ones included: from a background
	// goroutine for the automatic measurements, from the caller's for
	// MeasureClock.
	ClockSkew func(ClockSkew)
	// Waiting is called with +1 when a blocking acquisition (Acquire,
	// TryAcquireTimeout) of the limiter named limiter (a composite's names
	// joined by "+", as Decision.Limiter) starts, and with -1 when it
	// returns, from the caller's goroutine: the sum is the blocking calls
	// in progress, for a gauge of queued waiters. A call granted at once
	// counts for its round trip.
	Waiting func(limiter string, delta int)
	// Lease is called when a lease (WithLeases) has ended and its unused
	// permits were given back or could not be: what Redis granted, what the
	// Client's callers got and what came back. It is called inline from the
	// goroutine that ended the lease: a deadline timer's, a return's,
	// Close's, or a caller's (whose acquisition ran the lease call), which
	// waits for it. Close waits until every lease's event was reported, so
	// the hook must not call Close: Close would wait for the hook itself
	// until its context ends.
	Lease func(LeaseEvent)
	// Outage is called when a Client made with WithOutageFallback finds
	// Redis unreachable and begins to decide locally, from the goroutine
	// of the call that found it, and when the outage ends, from the
	// probe's goroutine (or Close's), once calls go to Redis again.
	Outage func(OutageEvent)
}

// Op names the acquisition a Decision reports on.
type Op uint8

const (
	// OpAllow is Allow or TryAcquire: one try, no waiting.
	OpAllow Op = iota + 1
	// OpTryAcquireTimeout is TryAcquireTimeout: waits up to a timeout.
	OpTryAcquireTimeout
	// OpAcquire is Acquire: waits as long as it takes.
	OpAcquire
)

// String returns "allow", "try_acquire_timeout", "acquire" or "Op(n)";
// the names are stable, for use as metric attribute values.
func (o Op) String() string {
	switch o {
	case OpAllow:
		return "allow"
	case OpTryAcquireTimeout:
		return "try_acquire_timeout"
	case OpAcquire:
		return "acquire"
	}
	return "Op(" + strconv.Itoa(int(o)) + ")"
}

// Decision reports how one acquisition ended.
type Decision struct {
	// Limiter is the name given to Client.Limiter, before name mapping.
	Limiter string
	// Op is the method that was called.
	Op Op
	// Permits is the number of permits asked for.
	Permits int64
	// Granted reports whether the permits were taken.
	Granted bool
	// RetryAfter is, for a refusal, the last wait hint Redis gave; 0 when
	// granted or when the call failed before a hint came back.
	RetryAfter time.Duration
	// Waited is the time the call spent waiting for permits (sleeping on
	// wait hints, queued behind other waiters): 0 for Allow.
	Waited time.Duration
	// RoundTrip is the duration of the last script call that decided this
	// acquisition, as this process saw it (queueing for a connection
	// included); 0 when nothing was sent.
	RoundTrip time.Duration
	// Batch is the number of acquisitions that the last script call
	// decided together, this one included: 1 without combining, 0 when
	// nothing was sent.
	Batch int
	// Local is true when the Client refused the call without a Redis call,
	// from an earlier refusal of the limiter whose hint has not passed
	// (WithLocalRefusals).
	Local bool
	// Leased is true when the Client granted the call from its lease of
	// the limiter without a Redis call (WithLeases); RoundTrip and Batch
	// are then 0.
	Leased bool
	// Degraded is true when the Client decided the call by its local
	// window because Redis was unreachable (WithOutageFallback):
	// RetryAfter is then the local window's hint, RoundTrip and Batch are
	// 0, and Err is the local decision's (ErrPermitsExceedRate, ctx's),
	// never Redis's. A blocking call that waited both on Redis and
	// locally is Degraded when the local window decided it.
	Degraded bool
	// Err is the error the call returned, or nil.
	Err error
}

// ErrorKind classifies err (a Decision's or a ClockSkew's) into a small,
// stable set of names for metric attributes: "" (no error), "canceled",
// "deadline", "not_initialized", "exceeds_rate", "invalid_argument",
// "corrupt_state", "replica_ack" or "redis".
func ErrorKind(err error) string {
	switch {
	case err == nil:
		return ""
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.Is(err, context.DeadlineExceeded):
		return "deadline"
	case errors.Is(err, ErrNotInitialized):
		return "not_initialized"
	case errors.Is(err, ErrPermitsExceedRate):
		return "exceeds_rate"
	case errors.Is(err, ErrInvalidArgument):
		return "invalid_argument"
	case errors.Is(err, ErrCorruptState):
		return "corrupt_state"
	case errors.Is(err, ErrReplicaAck):
		return "replica_ack"
	}
	return "redis"
}

// decided reports d to the Decision hook, if there is one, and starts a
// clock measurement in the background when one is due (clock_skew.go). names
// are the limiters whose intervals the measurement weighs the skew
// against: d.Limiter when none are given (a composite gives its parts).
func (c *Client) decided(ctx context.Context, d Decision, names ...string) {
	c.skew.tick(c, &d, names)
	if c.hooks.Decision != nil {
		c.hooks.Decision(d)
	}
	if c.hooks.DecisionContext != nil {
		c.hooks.DecisionContext(ctx, d)
	}
}
