package ratelimiter_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/goredisson/ratelimiter"
	"github.com/goredisson/ratelimiter/internal/redistest"
)

// limiterOp is one library call that reaches Redis.
type limiterOp struct {
	name string
	run  func(ctx context.Context, l *ratelimiter.Limiter) error
}

var opsCfg = ratelimiter.Config{Rate: 10, Interval: time.Hour}

// limiterOps are every library call that reaches Redis, on a limiter
// configured with opsCfg.
var limiterOps = []limiterOp{
	{"try-set-rate", func(ctx context.Context, l *ratelimiter.Limiter) error {
		_, err := l.TrySetRate(ctx, opsCfg)
		return err
	}},
	{"set-rate", func(ctx context.Context, l *ratelimiter.Limiter) error { return l.SetRate(ctx, opsCfg) }},
	{"set-rate keep-state", func(ctx context.Context, l *ratelimiter.Limiter) error {
		return l.SetRate(ctx, opsCfg, ratelimiter.KeepState())
	}},
	{"update-rate", func(ctx context.Context, l *ratelimiter.Limiter) error {
		_, err := l.UpdateRate(ctx, opsCfg)
		return err
	}},
	{"config", func(ctx context.Context, l *ratelimiter.Limiter) error { _, err := l.Config(ctx); return err }},
	{"try-acquire", func(ctx context.Context, l *ratelimiter.Limiter) error { _, err := l.TryAcquire(ctx, 1); return err }},
	{"allow", func(ctx context.Context, l *ratelimiter.Limiter) error { _, err := l.Allow(ctx, 1); return err }},
	{"acquire", func(ctx context.Context, l *ratelimiter.Limiter) error {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		return l.Acquire(ctx, 1)
	}},
	{"try-acquire-timeout", func(ctx context.Context, l *ratelimiter.Limiter) error {
		_, err := l.TryAcquireTimeout(ctx, 1, time.Second)
		return err
	}},
	{"release", func(ctx context.Context, l *ratelimiter.Limiter) error { return l.Release(ctx, 1) }},
	{"available", func(ctx context.Context, l *ratelimiter.Limiter) error { _, err := l.AvailablePermits(ctx); return err }},
	{"expire", func(ctx context.Context, l *ratelimiter.Limiter) error {
		_, err := l.Expire(ctx, time.Hour)
		return err
	}},
	{"expire-at", func(ctx context.Context, l *ratelimiter.Limiter) error {
		_, err := l.ExpireAt(ctx, time.Now().Add(time.Hour))
		return err
	}},
	{"clear-expire", func(ctx context.Context, l *ratelimiter.Limiter) error { _, err := l.ClearExpire(ctx); return err }},
	{"ttl", func(ctx context.Context, l *ratelimiter.Limiter) error { _, err := l.RemainTimeToLive(ctx); return err }},
	{"exists", func(ctx context.Context, l *ratelimiter.Limiter) error { _, err := l.Exists(ctx); return err }},
	{"delete", func(ctx context.Context, l *ratelimiter.Limiter) error { _, err := l.Delete(ctx); return err }},
}

// ownServer starts a redis-server for a test that changes server-wide
// settings or counts a server's commands: its own, even when REDIS_ADDR
// names a shared one.
func ownServer(t *testing.T, args ...string) *redistest.Server {
	t.Helper()
	redistest.Need(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	srv, err := redistest.StartWrapped(ctx, nil, args...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Close() })
	return srv
}

// TestOperationalErrors: OOM, READONLY and NOPERM raised inside the
// scripts come back as the Redis errors they are (redis.Error with that
// code), never as ErrCorruptState, from every call that meets them.
func TestOperationalErrors(t *testing.T) {
	ctx := context.Background()
	srv := ownServer(t)
	admin := redistest.Client(t, srv.Addr())
	for _, tc := range []struct {
		code string
		// fault breaks the server for the limiter's client and returns
		// the undo.
		fault func(t *testing.T) (*redis.Client, func())
		// mustFail are the calls that cannot succeed under the fault. (Under
		// OOM, release may succeed: its first write removes records, which
		// Redis allows, and a script may go on writing once it has.)
		mustFail []string
		// is recognises the Redis error.
		is func(msg string) bool
	}{
		{"OOM", func(t *testing.T) (*redis.Client, func()) {
			require.NoError(t, admin.ConfigSet(ctx, "maxmemory-policy", "noeviction").Err())
			require.NoError(t, admin.ConfigSet(ctx, "maxmemory", "1").Err())
			return admin, func() { require.NoError(t, admin.ConfigSet(ctx, "maxmemory", "0").Err()) }
		}, []string{"try-set-rate", "set-rate", "set-rate keep-state", "update-rate", "try-acquire", "allow", "acquire",
			"try-acquire-timeout"}, prefix("OOM ")},
		{"READONLY", func(t *testing.T) (*redis.Client, func()) {
			// A replica of a master that is not there keeps its data and
			// refuses writes.
			port, err := redistest.FreePort()
			require.NoError(t, err)
			require.NoError(t, admin.Do(ctx, "REPLICAOF", "127.0.0.1", strconv.Itoa(port)).Err())
			return admin, func() { require.NoError(t, admin.Do(ctx, "REPLICAOF", "NO", "ONE").Err()) }
		}, []string{"try-set-rate", "set-rate", "set-rate keep-state", "update-rate", "try-acquire", "allow", "acquire",
			"try-acquire-timeout", "release", "expire", "expire-at", "clear-expire", "delete"}, prefix("READONLY ")},
		{"NOPERM", func(t *testing.T) (*redis.Client, func()) {
			// A user who may run everything but the reads and the first
			// write of the scripts.
			require.NoError(t, admin.Do(ctx, "ACL", "SETUSER", "noperm", "reset", "on", ">pw", "~*", "&*", "+@all",
				"-hmget", "-hget", "-hsetnx").Err())
			c := redis.NewClient(&redis.Options{Addr: srv.Addr(), Username: "noperm", Password: "pw"})
			return c, func() { _ = c.Close() }
		}, []string{"try-set-rate", "set-rate", "set-rate keep-state", "update-rate", "try-acquire", "allow", "acquire",
			"try-acquire-timeout", "release", "available"}, func(msg string) bool {
			// Redis 7.0 says "ERR The user executing the script can't run
			// this command or subcommand" inside scripts, later versions
			// NOPERM.
			return strings.HasPrefix(msg, "NOPERM ") || strings.Contains(msg, "can't run this command")
		}},
	} {
		t.Run(tc.code, func(t *testing.T) {
			name := uniqueName(t)
			setupLimiter := func() {
				l := ratelimiter.NewClient(admin).Limiter(name)
				require.NoError(t, l.SetRate(ctx, opsCfg))
				_, err := l.TryAcquire(ctx, 1)
				require.NoError(t, err)
			}
			setupLimiter()
			rdb, undo := tc.fault(t)
			defer undo()
			l := ratelimiter.NewClient(rdb).Limiter(name)
			for _, op := range limiterOps {
				err := op.run(ctx, l)
				must := false
				for _, m := range tc.mustFail {
					must = must || m == op.name
				}
				if err == nil {
					require.False(t, must, "%s succeeded under %s", op.name, tc.code)
					continue
				}
				require.NotErrorIs(t, err, ratelimiter.ErrCorruptState, "%s: %v", op.name, err)
				if tc.code == "NOPERM" && errors.Is(err, ratelimiter.ErrPermissionDenied) {
					continue // refused before the script ran (redis_permissions.go)
				}
				var rerr redis.Error
				require.True(t, errors.As(err, &rerr), "%s: %T %v is not a redis.Error", op.name, err, err)
				require.True(t, tc.is(rerr.Error()), "%s: %v", op.name, err)
			}
		})
	}
}

func prefix(p string) func(string) bool {
	return func(msg string) bool { return strings.HasPrefix(msg, p) }
}
