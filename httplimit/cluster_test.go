package httplimit_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goredisson/ratelimiter"
	"github.com/goredisson/ratelimiter/httplimit"
	"github.com/goredisson/ratelimiter/internal/redistest"
	"github.com/goredisson/ratelimiter/wire"
)

// On a real 6-node Redis Cluster, the rules of every key (plain keys,
// and keys with braces that are hashed) share one slot: each request is
// one script call on one master, with no error; the keys land on every
// master; and a refusal by one rule takes nothing from the other.
func TestRulesCluster(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := redistest.StartCluster(ctx, t)
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs()})
	t.Cleanup(func() { _ = rdb.Close() })
	var mu sync.Mutex
	var hooked []error
	lim, err := httplimit.New(rdb, ratelimiter.Config{}, httplimit.WithPrefix("cl:"),
		httplimit.WithKey(httplimit.KeyByHeader("X-Key")), httplimit.WithRules(minuteRule, hourRule),
		httplimit.WithErrorHook(func(r *http.Request, err error) { mu.Lock(); hooked = append(hooked, err); mu.Unlock() }))
	require.NoError(t, err)
	srv := serve(t, lim.Handler(&counting{}))

	keys := []string{"a{b}", "{x}", "}{", "a{}", strings.Repeat("k", 300)}
	for i := 0; i < 12; i++ {
		keys = append(keys, fmt.Sprintf("user-%d", i))
	}
	masters := map[string]bool{}
	for _, key := range keys {
		names := lim.Names("X-Key:" + key)
		var slots []int
		for _, name := range names {
			k := wire.KeysFor(name, lim.Client().ID())
			for _, redisKey := range []string{k.Config, k.Value, k.ClientValue, k.Permits, k.ClientPermits} {
				slot, err := c.KeySlot(ctx, redisKey)
				require.NoError(t, err)
				slots = append(slots, slot)
			}
		}
		for _, s := range slots {
			require.Equal(t, slots[0], s, "key %q: every key of every rule in one slot", key)
		}
		m, err := c.MasterForSlot(ctx, slots[0])
		require.NoError(t, err)
		masters[m.Addr] = true

		for i := 0; i < 3; i++ {
			require.Equal(t, http.StatusOK, get(t, srv.URL, "X-Key", key).StatusCode, "key %q request %d", key, i)
		}
		resp := get(t, srv.URL, "X-Key", key)
		require.Equal(t, http.StatusTooManyRequests, resp.StatusCode, key)
		assert.Equal(t, `"hour";q=3;w=3600, "minute";q=5;w=60`, resp.Header.Get("RateLimit-Policy"), key)
		assert.Equal(t, int64(2), available(t, lim, names[0]), "key %q: the refusal took nothing from the per-minute rule", key)
	}
	assert.Len(t, masters, 3, "the keys land on all three masters")
	mu.Lock()
	defer mu.Unlock()
	assert.Empty(t, hooked)
}
