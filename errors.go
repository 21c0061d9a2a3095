package ratelimiter

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/goredisson/ratelimiter/internal/script"
)

var (
	// ErrNotInitialized is returned by calls that need a configured limiter
	// (acquire, release, available permits) when its config hash is missing
	// or lacks rate, interval or type. Redisson's message for this case is
	// "RateLimiter is not initialized".
	ErrNotInitialized = script.ErrNotInitialized

	// ErrPermitsExceedRate is returned when a single call asks for more
	// permits than the limiter's rate: such a call could never be granted.
	ErrPermitsExceedRate = script.ErrPermitsExceedRate

	// ErrInvalidArgument is returned, before anything is sent to Redis, for
	// an argument outside its documented range. The error text names the
	// argument and the value.
	ErrInvalidArgument = script.ErrInvalidArgument

	// ErrCrossSlot is returned on a Redis Cluster client for a limiter name
	// whose five keys would not share one hash slot (such as "a{b"). It
	// also matches ErrInvalidArgument.
	ErrCrossSlot = fmt.Errorf("%w: the limiter's keys do not share one cluster hash slot; use a name with no '{' or with one '{tag}'", ErrInvalidArgument)

	// ErrInvalidWeights is returned, before anything is sent to Redis, by
	// the calls of a Composite view made with Weighted with weights that
	// cannot be used: not one per part, negative, all 0, or so large that
	// the permits asked times a weight exceed MaxPermits. The error text
	// says which. It also matches ErrInvalidArgument.
	ErrInvalidWeights = fmt.Errorf("%w: composite weights", ErrInvalidArgument)

	// ErrCorruptState is returned when Redis holds something the protocol
	// does not expect: a key of the wrong type, a non-numeric field, a
	// permit record too short to hold a count. The call changed nothing.
	// Redis's own refusals (OOM, READONLY, NOPERM, ...) are not this: they
	// come back as the redis.Error that Redis sent.
	ErrCorruptState = script.ErrCorruptState

	// ErrPermissionDenied is returned, before the call's script runs, when
	// the Redis user may not run a command that the call's script needs
	// after its first write; the error text names the commands. Redis does
	// not roll a script back, so such a call would have left the limiter
	// half-written. An ACL refusal that still reaches a script (the ACL
	// changed after the check) matches this error too, and errors.As finds
	// the redis.Error; on Redis 7.0 and later and Valkey the script then
	// refused before its first write, having written nothing (on Redis 6.2
	// see docs/operations.md, "Least-privilege ACL").
	ErrPermissionDenied = script.ErrPermissionDenied

	// ErrReplicaAck is matched (errors.Is) by the error of an acquisition
	// (TryAcquire, TryAcquireTimeout, Acquire, Allow) on a Client made with
	// WithReplicaAck that Redis granted but that fewer replicas than asked
	// for acknowledged within the timeout; the call reports it with a false
	// grant, and the error text says how many replicas acknowledged.
	//
	// The permits HAVE been taken on the master: they count against the
	// limit until their interval ends, and they are not given back. The
	// call reports them as not granted because the grant may not survive a
	// failover: if the master crashes now, a replica without the write can
	// take over, forget it, and grant the same permits again. Failing
	// closed keeps the limit at the cost of availability: while a master
	// has fewer replicas than asked for, every acquisition waits the
	// timeout and fails. A caller that prefers availability may treat the
	// error as a grant:
	//
	//	ok, err := lim.TryAcquire(ctx, 1)
	//	if errors.Is(err, ratelimiter.ErrReplicaAck) {
	//		ok, err = true, nil // granted by the master, not yet durable
	//	}
	//
	// A blocking Acquire returns the error at once and does not wait again.
	ErrReplicaAck = script.ErrReplicaAck
)

func invalid(format string, args ...any) error { return script.Invalid(format, args...) }

// LimiterError is how every error of a limiter's call reaches the caller:
// it names the limiter, and errors.Is and errors.As see through it to the
// sentinel errors, Redis's errors and the context's.
type LimiterError struct {
	Limiter string // the name given to Client.Limiter
	Err     error  // what went wrong
}

// Error returns `ratelimiter "NAME": ` and Err's text.
func (e *LimiterError) Error() string {
	return "ratelimiter " + strconv.Quote(e.Limiter) + ": " + strings.TrimPrefix(e.Err.Error(), "ratelimiter: ")
}

// Unwrap returns Err.
func (e *LimiterError) Unwrap() error { return e.Err }

// wrap names r in err, once; nil stays nil.
func (r *Limiter) wrap(err error) error {
	if err == nil {
		return nil // before le: errors.As's target escapes, and would cost every call an allocation
	}
	var le *LimiterError
	if errors.As(err, &le) {
		return err
	}
	return &LimiterError{Limiter: r.name, Err: err}
}

// result is Client.result for a call of r: the error names r.
func (r *Limiter) result(err error) error { return r.wrap(r.c.conn.Result(err)) }
