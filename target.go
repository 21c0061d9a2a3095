package ratelimiter

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/goredisson/ratelimiter/internal/engine"
	"github.com/goredisson/ratelimiter/internal/script"
)

// The engine (internal/engine) drives script calls through targets: a
// Limiter is an engine.Limiter, a Composite an engine.Target. The views
// are defined types of the root's, so that their methods stay out of the
// public API; converting a pointer costs nothing.

// limiterTarget is a Limiter as the engine sees it.
type limiterTarget Limiter

// compositeTarget is a Composite as the engine sees it.
type compositeTarget Composite

func (r *Limiter) target() engine.Target   { return (*limiterTarget)(r) }
func (a *Composite) target() engine.Target { return (*compositeTarget)(a) }

func (t *limiterTarget) lim() *Limiter { return (*Limiter)(t) }

// LaneKey is "1" and the config key, made once in Client.Limiter (every
// acquisition asks for it): composites' lane keys begin with another byte
// (composite.go).
func (t *limiterTarget) LaneKey() string { return t.lane }

func (t *limiterTarget) MaxWeight() int64 { return 1 }

func (t *limiterTarget) Name() string { return t.name }

// Decide runs internal/script/lua/acquire.lua once for the permits ns.
// With an outage fallback, it notes the rate the reply carries, asking
// for the reply that carries it when the rate is unknown or stale, and
// a call that found Redis unreachable or had no answer by its deadline
// begins an outage, also when its callers have gone: the engine runs
// Decide to its end.
func (t *limiterTarget) Decide(ctx context.Context, f engine.Form, ns []int64) engine.Reply {
	out := t.c.out
	if out == nil {
		return t.c.conn.Acquire(ctx, t.sk, f, ns)
	}
	if f.Kind == engine.Single && out.stale(t.lane) {
		f.Kind = engine.Table
	}
	b := t.c.conn.Acquire(ctx, t.sk, f, ns)
	switch {
	case unreachable(b.Err):
		out.enter(b.Err)
	case unanswered(ctx, b.Err):
		out.enter(fmt.Errorf("ratelimiter: no answer from Redis by the call's deadline: %w", b.Err))
	}
	out.learnReply(t.lane, b)
	return b
}

// GiveBack runs internal/script/lua/release.lua: n permits back, out of
// this Client's own records first, then Redisson's, then other Go
// Clients', oldest first, never out of keep.
func (t *limiterTarget) GiveBack(ctx context.Context, n int64, keep []byte) error {
	mark, at := t.c.conn.OwnMark()
	_, err := t.lim().eval(ctx, script.Release, t.sk.All, n, t.c.stamp(), mark, at, keep)
	return err
}

// Census reads the limiter's interval and the newest max records of its
// window.
func (t *limiterTarget) Census(ctx context.Context, max int) (time.Duration, []engine.Record, error) {
	return t.c.conn.Census(ctx, t.keys, max)
}

// Lease runs internal/script/lua/lease.lua; its error names the limiter.
func (t *limiterTarget) Lease(ctx context.Context, call engine.LeaseCall) engine.LeaseReply {
	r := t.c.conn.Lease(ctx, t.sk, call)
	if t.c.out != nil && r.Err == nil && r.Interval > 0 {
		t.c.out.learn(t.lane, r.Rate, r.Interval)
	}
	r.Err = t.lim().wrap(r.Err)
	return r
}

// ReturnLease runs internal/script/lua/lease_end.lua: the idempotent return of u permits
// of the lease record member; its error names the limiter.
func (t *limiterTarget) ReturnLease(ctx context.Context, member []byte, u int64) engine.ReturnReply {
	r := t.c.conn.ReturnLease(ctx, t.sk, member, u)
	r.Err = t.lim().wrap(r.Err)
	return r
}

// eval runs s, a script whose reply is one integer, on keys of r (its
// permissions checked on r's five keys); the error names r.
func (r *Limiter) eval(ctx context.Context, s *redis.Script, keys []string, args ...any) (int64, error) {
	v, err := r.c.conn.Eval(ctx, s, r.sk.All, keys, args...)
	return v, r.wrap(err)
}

// dropLease ends this Client's live lease of r before its SetRate,
// UpdateRate, Delete or Expire* (engine.DropLease) and returns what to run
// after the call.
func (r *Limiter) dropLease() func() { return r.c.eng.DropLease((*limiterTarget)(r)) }
