package redistest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/goredisson/ratelimiter/internal/redisproc"
)

// Callgrind starts a redis-server under callgrind for t (stopped when t
// ends) and returns it with a client on it whose reads wait a minute (a
// server under valgrind is slow). Without valgrind it skips t, unless
// servers are required (Required), when it fails t.
func Callgrind(t testing.TB, ctx context.Context) (*redisproc.Callgrind, *redis.Client) {
	t.Helper()
	cg, err := redisproc.StartCallgrind(ctx)
	if errors.Is(err, redisproc.ErrNoCallgrind) && !Required() {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cg.Close() })
	rdb := redis.NewClient(&redis.Options{Addr: cg.Addr(), ReadTimeout: time.Minute})
	t.Cleanup(func() { _ = rdb.Close() })
	return cg, rdb
}
