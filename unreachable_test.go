package ratelimiter

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/goredisson/ratelimiter/internal/script"
)

// redisReply is an error as go-redis returns Redis's replies.
type redisReply string

func (e redisReply) Error() string { return string(e) }
func (redisReply) RedisError()     {}

func TestUnreachableClassifies(t *testing.T) {
	dial := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	read := &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}
	for _, c := range []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"dial refused", dial, true},
		{"dial refused, wrapped twice", &LimiterError{Limiter: "x", Err: fmt.Errorf("call: %w", dial)}, true},
		{"read timeout", read, true},
		{"connection reset", &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}, true},
		{"broken pipe", fmt.Errorf("write: %w", syscall.EPIPE), true},
		{"no route", fmt.Errorf("dial: %w", syscall.EHOSTUNREACH), true},
		{"DNS", &net.DNSError{Err: "no such host", Name: "redis.invalid"}, true},
		{"EOF", io.EOF, true},
		{"unexpected EOF", fmt.Errorf("reading reply: %w", io.ErrUnexpectedEOF), true},
		{"closed conn", net.ErrClosed, false},
		{"read on a closed conn", &net.OpError{Op: "read", Net: "tcp", Err: net.ErrClosed}, false},
		{"pool timeout", redis.ErrPoolTimeout, false},
		{"pool exhausted", fmt.Errorf("evalsha: %w", redis.ErrPoolExhausted), false},
		{"sentinels", errors.New("redis: all sentinels specified in configuration are unreachable: dial tcp: refused"), true},
		{"ring", errors.New("redis: all ring shards are down"), true},
		{"client closed", redis.ErrClosed, false},
		{"canceled", context.Canceled, false},
		{"deadline", fmt.Errorf("ratelimiter: no answer from Redis within the timeout: %w", context.DeadlineExceeded), false},
		{"not initialized", ErrNotInitialized, false},
		{"exceeds rate", ErrPermitsExceedRate, false},
		{"invalid argument", invalid("permits 0"), false},
		{"corrupt state", ErrCorruptState, false},
		{"permission denied", fmt.Errorf("%w: %w", ErrPermissionDenied, redisReply("NOPERM this user has no permissions to run the 'evalsha' command")), false},
		{"script error", redisReply("ERR user_script:1: Script attempted to access nonexistent global variable"), false},
		{"loading", redisReply("LOADING Redis is loading the dataset in memory"), false},
		{"readonly", redisReply("READONLY You can't write against a read only replica."), false},
		{"oom", redisReply("OOM command not allowed when used memory > 'maxmemory'."), false},
		{"other", errors.New("something else"), false},
	} {
		require.Equal(t, c.want, unreachable(c.err), "%s: %v", c.name, c.err)
	}
}

func TestUnansweredIsTheCallsOwnDeadline(t *testing.T) {
	passed, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	canceled, cancel2 := context.WithCancel(context.Background())
	cancel2()
	require.True(t, unanswered(passed, fmt.Errorf("evalsha: %w", context.DeadlineExceeded)))
	require.False(t, unanswered(passed, nil), "answered")
	require.False(t, unanswered(passed, ErrNotInitialized), "answered with an error")
	require.False(t, unanswered(canceled, context.Canceled), "canceled by the caller")
	require.False(t, unanswered(context.Background(), context.DeadlineExceeded), "not the call's deadline")
	require.False(t, unanswered(passed, fmt.Errorf("%w: %w", script.ErrNotSent, context.DeadlineExceeded)),
		"never sent: it waited for a flight past its deadline")
}
