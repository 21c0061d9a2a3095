package script

import (
	"errors"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"
)

// The sentinel errors; the root exports them under the same names, with
// their contracts (errors.go there).
var (
	ErrNotInitialized    = errors.New("ratelimiter: RateLimiter is not initialized")
	ErrPermitsExceedRate = errors.New("ratelimiter: requested permits amount cannot exceed defined rate")
	ErrInvalidArgument   = errors.New("ratelimiter: invalid argument")
	ErrCorruptState      = errors.New("ratelimiter: unexpected limiter state in Redis")
	ErrPermissionDenied  = errors.New("ratelimiter: the Redis user may not run a command the call needs")
	ErrReplicaAck        = errors.New("ratelimiter: acquisition not acknowledged by enough replicas")
)

// Invalid returns an error matching ErrInvalidArgument with the text.
func Invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidArgument, fmt.Sprintf(format, args...))
}

// MapError maps the prefixed errors that the scripts raise, and Redis's
// own WRONGTYPE, to the sentinel errors. Anything else (network, cluster,
// OOM, READONLY, NOPERM, raised inside a script or not) is returned
// unchanged, so that callers can inspect the redis.Error.
func MapError(err error) error {
	if err == nil {
		return nil // before rerr, which escapes (errors.As): no allocation on success
	}
	err = innerScriptError(err)
	var rerr redis.Error
	if !errors.As(err, &rerr) {
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
	case "RLSTEP":
		return fmt.Errorf("%w: %s", errClockStepped, text)
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
	if err == nil {
		return nil // before rerr, which escapes (errors.As): no allocation on success
	}
	var rerr redis.Error
	if !errors.As(err, &rerr) {
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
