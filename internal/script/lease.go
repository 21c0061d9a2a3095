package script

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/goredisson/ratelimiter/internal/engine"
)

// MaxPermits is the most permits one record holds.
const MaxPermits = engine.MaxPermits

// Lease runs lua/lease.lua on the limiter of keys k, again on a record
// collision with a fresh record (the return, applied by the colliding run,
// is not sent again). Errors do not name the limiter yet.
func (c *Conn) Lease(ctx context.Context, k Keys, call engine.LeaseCall) engine.LeaseReply {
	need, want, share, prevMember, unused := call.Need, call.Want, call.Share, call.Prev, call.Unused
	if prevMember == nil {
		unused = 0
	}
	var returned int64
	for i := 0; i < memberRetries; i++ {
		prefix := newPrefix(c.format, c.tag)
		out := engine.LeaseReply{SentAt: time.Now(), Returned: returned}
		v, err := c.evalLease(ctx, k, c.Stamp(), prefix, need, want, share, prevMember, unused)
		out.RepliedAt = time.Now()
		out.RoundTrip = out.RepliedAt.Sub(out.SentAt)
		var ackErr *ackError
		if err != nil && (v == nil || !errors.As(err, &ackErr)) {
			out.Err, out.Denied = err, errors.Is(err, ErrPermissionDenied)
			return out
		}
		nums, ok := ints(v, 7)
		if !ok || nums[0] < -1 || nums[0] > 0 && (nums[0] < need || nums[0] > want || nums[0] > MaxPermits) ||
			nums[0] != 0 && (nums[2] <= 0 || nums[3] <= 0) || nums[6] < 0 || nums[6] > unused {
			out.Err = fmt.Errorf("%w: lease script replied %v", ErrCorruptState, v)
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
			out.Err, out.AckShort = ackErr, true
		}
		return out
	}
	return engine.LeaseReply{Returned: returned,
		Err: fmt.Errorf("%w: %d permit record collisions in a row", ErrCorruptState, memberRetries)}
}

// evalLease runs lease.lua on the limiter's five keys; on a Conn with
// replica acknowledgements a lease also waits for the replicas.
func (c *Conn) evalLease(ctx context.Context, k Keys, args ...any) (any, error) {
	if err := c.permitted(ctx, k.All, "acquire", needLease); err != nil {
		return nil, c.Result(err)
	}
	var v any
	var err error
	if c.ack.replicas > 0 {
		v, err = c.evalAckIf(ctx, scriptLease, leaseGranted, k.All, [][]string{k.All}, args...)
	} else {
		v, err = c.runGranting(ctx, scriptLease, k.All, args, [][]string{k.All})
	}
	return v, c.Result(err)
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

// ReturnLease runs lua/lease_end.lua: the idempotent return of u permits
// of the lease record member of the limiter of keys k. Unknown is set
// when no reply says whether the script ran.
func (c *Conn) ReturnLease(ctx context.Context, k Keys, member []byte, u int64) engine.ReturnReply {
	given, err := c.Eval(ctx, scriptLeaseEnd, k.All, k.All, c.Stamp(), member, u)
	return engine.ReturnReply{Given: given, Err: err, Unknown: err != nil && unknownOutcome(err)}
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
