package ratelimiter

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/redis/go-redis/v9"

	"github.com/goredisson/ratelimiter/internal/script"
)

// unreachable reports whether err says that Redis could not be reached,
// as opposed to Redis answering with an error: the failures that start
// an outage (WithOutageFallback). They are connection-level: a dial that
// failed (refused, no route, DNS), a connection closed or reset by the
// other end under a command (EOF, ECONNRESET, EPIPE), a network timeout
// (go-redis's read, write or dial timeout), and the failover and Ring
// clients' "all sentinels unreachable" and "all ring shards are down".
// Not these: every reply of Redis (script errors, ErrNotInitialized,
// ErrPermitsExceedRate, ACL denials, OOM, READONLY, LOADING, ...),
// ErrInvalidArgument and ErrCorruptState, the caller's context ending
// (canceled, or its deadline passed: unanswered decides those), a closed
// client (go-redis's ErrClosed, and net.ErrClosed, a connection this
// process closed: the caller closed the go-redis client, which no
// outage mends), and go-redis's ErrPoolTimeout and ErrPoolExhausted.
// Those two say that this process has more calls in flight than its pool
// holds, not that Redis is gone: on a loaded but healthy Redis they would
// start outages that grant locally what Redis never records, while a
// Redis that is gone shows dial errors and timeouts (or a call's
// deadline passing, unanswered) to the calls that hold the connections.
func unreachable(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, redis.ErrClosed) || errors.Is(err, net.ErrClosed) ||
		errors.Is(err, redis.ErrPoolTimeout) || errors.Is(err, redis.ErrPoolExhausted) {
		return false
	}
	var rerr redis.Error
	if errors.As(err, &rerr) {
		return false // Redis answered
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
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
// sign. A call whose caller canceled it is not unanswered, nor one that
// was never sent (its error wraps script.ErrNotSent: its deadline passed
// while it waited in the Conn's queue, and Redis never saw it).
//
// One unanswered call is enough, although a loaded machine may stall a
// call past a short deadline while Redis is healthy: such a false outage
// lasts until the next probe, and since each limiter's local window is
// kept across outages (outage.end) all of them together grant at most
// the local limit in any window of one interval. Asking for two or more
// would not tell a stall from an outage (a stall misses the deadlines of
// every call in flight at once) and would delay a real outage by a
// deadline or more where calls are sparse.
func unanswered(ctx context.Context, err error) bool {
	return errors.Is(err, context.DeadlineExceeded) && errors.Is(ctx.Err(), context.DeadlineExceeded) &&
		!errors.Is(err, script.ErrNotSent)
}
