package ratelimiter

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/goredisson/ratelimiter/wire"
)

// Reply forms of the acquire script (lua/acquire.lua).
const (
	formSingle = "0" // one request, one integer back
	formTable  = "1" // a table: rate, interval, reset, then per request granted, left, hint
	formStrict = "2" // formTable, and no grant after the first refusal (queued waiters)
)

// holding returns form (formTable or formStrict) granting a request only
// while k permits stay free after it: a probe window's hold
// (fairness_probe.go). A request refused for that alone is held.
func holding(form string, k int64) string { return form + ":" + strconv.FormatInt(k, 10) }

// verdict is the script's decision on one request of a batch.
type verdict struct {
	res  Result
	err  error // ErrPermitsExceedRate for this request only
	held bool  // refused only to hold permits free (holding)
}

// batchReply is what one script call decided.
type batchReply struct {
	verdicts  []verdict
	err       error // for every request: Redis, config or state errors
	roundTrip time.Duration
	sentAt    time.Time // the Client's clock when the deciding call was sent
}

// decide runs the acquire script once for the permits ns, in order, and
// returns one verdict for each. form is formSingle (len(ns) must be 1),
// formTable or formStrict, or either of the last two holding permits
// (holding).
func (r *Limiter) decide(ctx context.Context, form string, ns []int64) batchReply {
	return r.c.decideWith(ctx, form, ns, r.evalAcquire, parseVerdicts)
}

// decideWith runs an acquire script through eval (ARGV: clock, permit
// record, form, permits) and reads its reply with parse. A record
// collision is retried with a fresh record; nothing was granted by the
// colliding call.
func (c *Client) decideWith(ctx context.Context, form string, ns []int64,
	eval func(context.Context, ...any) (any, error), parse func(any, string, []int64) ([]verdict, error)) batchReply {
	args := make([]any, 0, 3+len(ns))
	args = append(args, 0, nil, form)
	for _, n := range ns {
		args = append(args, n)
	}
	for i := 0; i < memberRetries; i++ {
		args[0], args[1] = c.stamp(), newPrefix(c.format, c.tag)
		if form == formSingle {
			args[1] = wire.New(c.format, c.tag, uint32(ns[0]))
		}
		start, sentAt := time.Now(), c.clock()
		reply, err := eval(ctx, args...)
		b := batchReply{roundTrip: time.Since(start), sentAt: sentAt}
		var ackErr *ReplicaAckError
		if err != nil && (reply == nil || !errors.As(err, &ackErr)) {
			b.err = err
			return b
		}
		if v, ok := reply.(int64); ok && v == -1 {
			continue
		}
		b.verdicts, b.err = parse(reply, form, ns)
		for i := range b.verdicts {
			if ackErr != nil && b.verdicts[i].res.Granted {
				// Granted by the master, not acknowledged: see ReplicaAckError.
				b.verdicts[i].res.Granted, b.verdicts[i].err = false, ackErr
			}
		}
		return b
	}
	return batchReply{err: fmt.Errorf("%w: %d permit record collisions in a row", ErrCorruptState, memberRetries)}
}

// parseVerdicts reads the acquire script's reply (see lua/acquire.lua).
func parseVerdicts(reply any, form string, ns []int64) ([]verdict, error) {
	if form == formSingle {
		v, ok := reply.(int64)
		switch {
		case !ok || v == -1:
			return nil, fmt.Errorf("%w: acquire script replied %v", ErrCorruptState, reply)
		case v >= 0:
			return []verdict{{res: Result{Granted: true, Remaining: v}}}, nil
		}
		return []verdict{{res: Result{RetryAfter: hintDuration(-v)}}}, nil
	}
	t, ok := reply.([]any)
	if !ok || len(t) != 3+3*len(ns) {
		return nil, fmt.Errorf("%w: acquire script replied %v", ErrCorruptState, reply)
	}
	nums := make([]int64, len(t))
	for i, x := range t {
		if nums[i], ok = x.(int64); !ok {
			return nil, fmt.Errorf("%w: acquire script replied %v", ErrCorruptState, reply)
		}
	}
	// Remaining is never below 0, as AvailablePermits: a value below 0
	// (a rate lowered under permits in use) means none are left.
	rate, interval, reset := nums[0], millis(nums[1]), millis(nums[2])
	out := make([]verdict, len(ns))
	for i, n := range ns {
		g, left, hint := nums[3+3*i], max(nums[4+3*i], 0), nums[5+3*i]
		res := Result{Granted: g == 1, Limit: rate, Interval: interval, Remaining: left, ResetAfter: reset}
		held := g == 2
		switch {
		case n > rate:
			out[i] = verdict{res: Result{Limit: rate, Interval: interval, Remaining: left, ResetAfter: reset}, err: ErrPermitsExceedRate}
			continue
		case !res.Granted:
			res.RetryAfter = hintDuration(hint)
		}
		out[i] = verdict{res: res, held: held}
	}
	return out, nil
}

// maxHint bounds wait hints: intervals up to 2^53-1 ms do not fit a
// time.Duration.
const maxHint = time.Duration(1<<63 - 1)

// hintDuration turns a hint in ms into a Duration that is positive (a
// refusal never says "retry now") and saturates instead of overflowing.
func hintDuration(ms int64) time.Duration {
	switch {
	case ms < 1:
		return time.Millisecond
	case ms > int64(maxHint/time.Millisecond):
		return maxHint
	}
	return time.Duration(ms) * time.Millisecond
}

// millis is hintDuration for lengths that may be 0.
func millis(ms int64) time.Duration {
	if ms <= 0 {
		return 0
	}
	return hintDuration(ms)
}

// newPrefix returns a fresh permit record in format f without its last
// four bytes, which the acquire script fills with the permits granted.
func newPrefix(f MemberFormat, tag wire.Tag) []byte {
	m := wire.New(f, tag, 0)
	return m[:len(m)-4]
}

// interval returns the limiter's interval from b's verdicts, 0 when none
// says.
func (b batchReply) interval() time.Duration {
	for _, v := range b.verdicts {
		if v.res.Interval > 0 {
			return v.res.Interval
		}
	}
	return 0
}
