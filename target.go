package ratelimiter

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/goredisson/ratelimiter/internal/engine"
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

// LaneKey is "1" and the config key: composites' lane keys begin with
// another byte (composite.go).
func (t *limiterTarget) LaneKey() string { return "1" + t.keys.Config }

func (t *limiterTarget) MaxWeight() int64 { return 1 }

func (t *limiterTarget) Name() string { return t.name }

// Decide runs lua/acquire.lua once for the permits ns (decide.go).
func (t *limiterTarget) Decide(ctx context.Context, f engine.Form, ns []int64) engine.Reply {
	return t.c.decideWith(ctx, f, ns, t.lim().evalAcquire, parseVerdicts)
}

// GiveBack runs lua/release.lua: n permits back, out of the newest records.
func (t *limiterTarget) GiveBack(ctx context.Context, n int64) error {
	_, err := t.lim().eval(ctx, scriptRelease, t.keyList, n, t.c.stamp())
	return err
}

// Census reads the limiter's interval and the newest max records of its
// window, in one round trip.
func (t *limiterTarget) Census(ctx context.Context, max int) (time.Duration, []engine.Record, error) {
	if t.c.rdb == nil {
		return 0, nil, ErrInvalidArgument
	}
	pipe := t.c.rdb.Pipeline()
	iv := pipe.HGet(ctx, t.keys.Config, "interval")
	zr := pipe.ZRangeWithScores(ctx, t.keys.Permits, -int64(max), -1)
	_, _ = pipe.Exec(ctx)
	ms, err := iv.Int64()
	if err != nil {
		return 0, nil, err
	}
	zs, err := zr.Result()
	if err != nil {
		return 0, nil, err
	}
	recs := make([]engine.Record, len(zs))
	for i, z := range zs {
		s, _ := z.Member.(string)
		recs[i] = engine.Record{Score: z.Score, Member: s}
	}
	return millis(ms), recs, nil
}

// ReturnLease runs lua/lease_end.lua: the idempotent return of u permits
// of the lease record member.
func (t *limiterTarget) ReturnLease(ctx context.Context, member []byte, u int64) engine.ReturnReply {
	given, err := t.lim().eval(ctx, scriptLeaseEnd, t.keyList, t.c.stamp(), member, u)
	return engine.ReturnReply{Given: given, Err: err, Unknown: err != nil && unknownOutcome(err)}
}

// Lease runs lua/lease.lua, again on a record collision with a fresh
// record (the return, applied by the colliding run, is not sent again).
func (t *limiterTarget) Lease(ctx context.Context, call engine.LeaseCall) engine.LeaseReply {
	r := t.lim()
	need, want, share, prevMember, unused := call.Need, call.Want, call.Share, call.Prev, call.Unused
	if prevMember == nil {
		unused = 0
	}
	c := r.c
	var returned int64
	for i := 0; i < memberRetries; i++ {
		prefix := newPrefix(c.format, c.tag)
		out := engine.LeaseReply{SentAt: time.Now(), Returned: returned}
		v, err := r.evalLease(ctx, c.stamp(), prefix, need, want, share, prevMember, unused)
		out.RepliedAt = time.Now()
		out.RoundTrip = out.RepliedAt.Sub(out.SentAt)
		var ackErr *ReplicaAckError
		if err != nil && (v == nil || !errors.As(err, &ackErr)) {
			out.Err, out.Denied = err, errors.Is(err, ErrPermissionDenied)
			return out
		}
		nums, ok := ints(v, 7)
		if !ok || nums[0] < -1 || nums[0] > 0 && (nums[0] < need || nums[0] > want || nums[0] > MaxPermits) ||
			nums[0] != 0 && (nums[2] <= 0 || nums[3] <= 0) || nums[6] < 0 || nums[6] > unused {
			out.Err = r.wrap(fmt.Errorf("%w: lease script replied %v", ErrCorruptState, v))
			return out
		}
		returned += nums[6]
		if nums[0] == -1 {
			prevMember, unused = nil, 0 // applied
			continue
		}
		out.Granted, out.Value, out.Rate = nums[0], nums[1], nums[2]
		out.Interval, out.Reset = millis(nums[3]), millis(nums[4])
		out.Stamp, out.Returned = nums[5], returned
		if out.Granted > 0 {
			g := uint32(out.Granted)
			out.Member = append(prefix, byte(g), byte(g>>8), byte(g>>16), byte(g>>24))
		}
		if ackErr != nil {
			out.Err, out.AckShort = r.wrap(ackErr), true
		}
		return out
	}
	return engine.LeaseReply{Returned: returned,
		Err: r.wrap(fmt.Errorf("%w: %d permit record collisions in a row", ErrCorruptState, memberRetries))}
}

// evalLease runs lease.lua on the limiter's five keys; on a Client made
// with WithReplicaAck a lease also waits for the replicas.
func (r *Limiter) evalLease(ctx context.Context, args ...any) (any, error) {
	if err := r.c.permitted(ctx, r.keyList, "acquire", needLease); err != nil {
		return nil, r.result(err)
	}
	var v any
	var err error
	if ack, ok := r.c.replicaAck(); ok {
		v, err = r.evalAckIf(ctx, scriptLease, ack, leaseGranted, r.keyList, args...)
	} else {
		v, err = scriptLease.Run(ctx, r.c.rdb, r.keyList, args...).Result()
	}
	return v, r.result(err)
}

// leaseGranted reports whether a lease.lua reply granted anything: what a
// replica must acknowledge.
func leaseGranted(reply any) bool {
	t, ok := reply.([]any)
	if !ok || len(t) == 0 {
		return false
	}
	g, _ := t[0].(int64)
	return g > 0
}

// unknownOutcome reports whether err leaves it unknown whether the script
// ran: no reply came (a network error, a timeout).
func unknownOutcome(err error) bool {
	return !errors.Is(err, ErrNotInitialized) && !errors.Is(err, ErrCorruptState) &&
		!errors.Is(err, ErrPermissionDenied) && !isRedisReply(err)
}

// isRedisReply reports whether err is an error reply from Redis: the
// command reached it.
func isRedisReply(err error) bool {
	var rerr redis.Error
	return errors.As(err, &rerr)
}

// dropLease ends this Client's live lease of r before its SetRate,
// UpdateRate, Delete or Expire* (engine.DropLease) and returns what to run
// after the call.
func (r *Limiter) dropLease() func() { return r.c.eng.DropLease((*limiterTarget)(r)) }
