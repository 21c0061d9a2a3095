// Package timerate gives a limiter shared through Redis the method names
// and signatures of golang.org/x/time/rate's Limiter (Allow, AllowN, Wait,
// WaitN), so that code written against an interface of those methods
// takes it unchanged (docs/timerate.md).
package timerate

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/goredisson/ratelimiter"
)

// Limiter has the method names and signatures of golang.org/x/time/rate's
// Limiter where a distributed sliding log can keep their contracts, so
// that code written against an interface of those methods (Allow, AllowN,
// Wait, WaitN) takes a limiter shared through Redis unchanged. Make one
// with New. It is safe for concurrent use.
//
// Where it differs from a token bucket: a sliding log grants at most the
// rate in any window of the interval, where a bucket of burst b grants up
// to b at once and then refills at its rate, so up to b plus a window's
// refill can pass in one interval; the "burst" here is the rate itself.
// And every call is a Redis round trip that can fail: Allow and AllowN,
// which return no error, report an error as a refusal (fail closed) and
// keep it for Err.
type Limiter struct {
	l       *ratelimiter.Limiter
	timeout time.Duration
	last    atomic.Pointer[error]
}

// New returns l with x/time/rate's method names. timeout bounds the Redis
// call of Allow and AllowN, which take no context; zero means 1 s. A
// negative timeout is taken as zero. The limiter must be configured
// (TrySetRate, from Go or Java) like any other: New sets no rate.
func New(l *ratelimiter.Limiter, timeout time.Duration) *Limiter {
	if timeout <= 0 {
		timeout = time.Second
	}
	return &Limiter{l: l, timeout: timeout}
}

// Allow is AllowN(time.Now(), 1).
func (t *Limiter) Allow() bool { return t.AllowN(time.Now(), 1) }

// AllowN reports whether n permits may be taken now, and takes them if
// so. The decision is made by Redis when the call's script runs: at
// is not used (x/time/rate decides at at; a shared limiter cannot decide
// at another time than now). A Redis error, or n below 1, gives false and
// is kept for Err.
func (t *Limiter) AllowN(at time.Time, n int) bool {
	_ = at
	ctx, cancel := context.WithTimeout(context.Background(), t.timeout)
	defer cancel()
	ok, err := t.l.TryAcquire(ctx, int64(n))
	if err != nil {
		t.last.Store(&err)
	}
	return ok
}

// Wait is WaitN(ctx, 1).
func (t *Limiter) Wait(ctx context.Context) error { return t.WaitN(ctx, 1) }

// WaitN blocks until n permits are taken and returns nil, as Acquire. As
// in x/time/rate, it returns an error at once when n exceeds what the
// limiter can ever grant (ratelimiter.ErrPermitsExceedRate here) and when the wait
// would pass ctx's deadline (an error wrapping context.DeadlineExceeded),
// and ctx.Err() when ctx is done while waiting; other errors are
// Acquire's (Redis errors included, which x/time/rate never has).
func (t *Limiter) WaitN(ctx context.Context, n int) error {
	return t.l.Acquire(ctx, int64(n))
}

// Err returns the last error that Allow or AllowN reported as a refusal,
// or nil when none has.
func (t *Limiter) Err() error {
	if p := t.last.Load(); p != nil {
		return *p
	}
	return nil
}
