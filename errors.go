package ratelimiter

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

var (
	// ErrNotInitialized is returned by calls that need a configured limiter
	// (acquire, release, available permits) when its config hash is missing
	// or lacks rate, interval or type. Redisson's message for this case is
	// "RateLimiter is not initialized".
	ErrNotInitialized = errors.New("ratelimiter: RateLimiter is not initialized")

	// ErrPermitsExceedRate is returned when a single call asks for more
	// permits than the limiter's rate: such a call could never be granted.
	ErrPermitsExceedRate = errors.New("ratelimiter: requested permits amount cannot exceed defined rate")

	// ErrInvalidArgument is returned, before anything is sent to Redis, for
	// an argument outside its documented range. The error text names the
	// argument and the value.
	ErrInvalidArgument = errors.New("ratelimiter: invalid argument")

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
	ErrCorruptState = errors.New("ratelimiter: unexpected limiter state in Redis")
)

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidArgument, fmt.Sprintf(format, args...))
}

// scriptError maps the prefixed errors that the scripts raise, and Redis's
// own WRONGTYPE, to the sentinel errors. Anything else (network, cluster,
// OOM, READONLY, NOPERM, raised inside a script or not) is returned
// unchanged, so that callers can inspect the redis.Error.
func scriptError(err error) error {
	err = innerScriptError(err)
	var rerr redis.Error
	if err == nil || !errors.As(err, &rerr) {
		return err
	}
	msg := rerr.Error()
	// Redis appends " script: <sha>, on @user_script:<line>." to errors
	// raised inside a script.
	if i := strings.Index(msg, " script: "); i >= 0 {
		msg = msg[:i]
	}
	code, text, _ := strings.Cut(msg, " ")
	switch code {
	case "RLNOTINIT":
		return ErrNotInitialized
	case "RLEXCEED":
		return ErrPermitsExceedRate
	case "RLSTATE":
		return fmt.Errorf("%w: %s", ErrCorruptState, text)
	case "WRONGTYPE":
		return fmt.Errorf("%w: %s", ErrCorruptState, msg)
	}
	return err
}

// scriptRaised is an error a command raised inside a script, as Redis 7
// and Valkey report it; innerScriptError makes it from Redis 6.2's words.
type scriptRaised string

func (e scriptRaised) Error() string { return string(e) }

// RedisError marks scriptRaised as an error reply of the server.
func (scriptRaised) RedisError() {}

// innerScriptError returns the error that a command raised inside a
// script as Redis 7 and Valkey report it ("READONLY ...", "WRONGTYPE
// ..."), from Redis 6.2's wording, which wraps it: "ERR Error running
// script (call to f_<sha>): @user_script:<line>: WRONGTYPE ..." when the
// script did not catch it, "@user_script: <line>: -READONLY ..." when a
// guarded script (redis_scripts.go) passed it on. Other errors come back
// unchanged.
func innerScriptError(err error) error {
	var rerr redis.Error
	if err == nil || !errors.As(err, &rerr) {
		return err
	}
	msg := rerr.Error()
	inner := msg
	if strings.HasPrefix(inner, "ERR Error running script") {
		_, inner, _ = strings.Cut(inner, "): ")
	}
	if !strings.HasPrefix(inner, "@user_script:") {
		return err
	}
	for strings.HasPrefix(inner, "@user_script:") {
		inner = strings.TrimLeft(inner[len("@user_script:"):], " 0123456789")
		inner = strings.TrimLeft(strings.TrimPrefix(inner, ":"), " ")
	}
	return scriptRaised(strings.TrimPrefix(inner, "-"))
}

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
	var le *LimiterError
	if err == nil || errors.As(err, &le) {
		return err
	}
	return &LimiterError{Limiter: r.name, Err: err}
}

// result is Client.result for a call of r: the error names r.
func (r *Limiter) result(err error) error { return r.wrap(r.c.result(err)) }
