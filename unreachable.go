package ratelimiter

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/redis/go-redis/v9"
)

// unreachable reports whether err says that Redis could not be reached,
// as opposed to Redis answering with an error: the failures that start
// an outage (WithOutageFallback). They are connection-level: a dial that
// failed (refused, no route, DNS), a connection closed or reset under a
// command (EOF, ECONNRESET, EPIPE), a network timeout (go-redis's read,
// write or dial timeout), go-redis's pool timeout and exhausted pool, and
// the failover and Ring clients' "all sentinels unreachable" and "all
// ring shards are down". Not these: every reply of Redis (script errors,
// ErrNotInitialized, ErrPermitsExceedRate, ACL denials, OOM, READONLY,
// LOADING, ...), ErrInvalidArgument and ErrCorruptState, go-redis's
// ErrClosed (the caller closed the client), and the caller's context
// ending (canceled, or its deadline passed: a stalled Redis that is not
// yet known to be down ends those calls as before).
func unreachable(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, redis.ErrClosed) {
		return false
	}
	var rerr redis.Error
	if errors.As(err, &rerr) {
		return false // Redis answered
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) ||
		errors.Is(err, redis.ErrPoolTimeout) || errors.Is(err, redis.ErrPoolExhausted) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.ECONNABORTED) || errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, syscall.EHOSTUNREACH) || errors.Is(err, syscall.ENETUNREACH) {
		return true
	}
	var nerr net.Error
	if errors.As(err, &nerr) {
		return true // *net.OpError, *net.DNSError, timeouts (os.ErrDeadlineExceeded)
	}
	msg := err.Error()
	return strings.Contains(msg, "all sentinels specified in configuration are unreachable") ||
		strings.Contains(msg, "redis: all ring shards are down")
}

// unanswered reports whether a script call sent with ctx ended with err
// because ctx's deadline passed before Redis answered: a timeout, which
// begins an outage as unreachable's failures do. go-redis hides a
// refused dial behind its retries (MaxRetries, DialerRetries: about 2 s
// with its defaults) and returns the context's error when the deadline
// comes first, so after a server stops this is most often the first
// sign. A call whose caller canceled it is not unanswered.
func unanswered(ctx context.Context, err error) bool {
	return errors.Is(err, context.DeadlineExceeded) && errors.Is(ctx.Err(), context.DeadlineExceeded)
}
