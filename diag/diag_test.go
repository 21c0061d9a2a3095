package diag_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/goredisson/ratelimiter/diag"
	"github.com/goredisson/ratelimiter/internal/redistest"
	"github.com/goredisson/ratelimiter/wire"
)

var redisAddr string

func TestMain(m *testing.M) { os.Exit(redistest.Main(m, &redisAddr, nil)) }

// ReadEviction reads the policy and maxmemory that CONFIG SET changed,
// and Evicts follows the policy's rule.
func TestReadEviction(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rdb := redistest.Client(t, redisAddr)
	e, err := diag.ReadEviction(ctx, rdb)
	require.NoError(t, err)
	require.False(t, e.Evicts(true), "%+v", e)
	require.NoError(t, rdb.ConfigSet(ctx, "maxmemory-policy", "volatile-lru").Err())
	require.NoError(t, rdb.ConfigSet(ctx, "maxmemory", "1gb").Err())
	t.Cleanup(func() {
		rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
		defer rdb.Close()
		rdb.ConfigSet(context.Background(), "maxmemory", "0")
		rdb.ConfigSet(context.Background(), "maxmemory-policy", "noeviction")
	})
	e, err = diag.ReadEviction(ctx, rdb)
	require.NoError(t, err)
	require.Equal(t, "volatile-lru", e.Policy)
	require.EqualValues(t, 1<<30, e.MaxMemory)
	require.True(t, e.Evicts(true))
	require.False(t, e.Evicts(false))
}

// MissingPermissions names nothing for the default user and names zrem
// for Release when a user may not run it.
func TestMissingPermissions(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rdb := redistest.Client(t, redisAddr)
	k := wire.KeysFor(redistest.Name(t), "id")
	missing, err := diag.MissingPermissions(ctx, rdb, k)
	require.NoError(t, err)
	require.Empty(t, missing)

	user := redistest.Name(t)
	require.NoError(t, rdb.Do(ctx, "ACL", "SETUSER", user, "on", ">pw", "~*", "+@all", "-zrem").Err())
	t.Cleanup(func() { rdb.Do(context.Background(), "ACL", "DELUSER", user) })
	limited := redis.NewClient(&redis.Options{Addr: redisAddr, Username: user, Password: "pw"})
	defer limited.Close()
	missing, err = diag.MissingPermissions(ctx, limited, k)
	require.NoError(t, err)
	require.Contains(t, missing["Release"], "zrem")
	require.NotContains(t, missing, "acquire", "acquire needs no zrem")
}
