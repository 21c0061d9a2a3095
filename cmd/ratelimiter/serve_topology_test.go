package main_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goredisson/ratelimiter/internal/redistest"
)

// Issue 38: serve with --cluster on a real 6-node cluster. One request's
// descriptors are separate limiters in different slots (each is decided
// on its own, so no call spans slots); each limiter's keys are written
// in its own slot and counted: 10 per minute runs out after 10 requests.
func TestServeCluster(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cl := redistest.StartCluster(ctx, t)
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs()})
	defer rdb.Close()
	domain := uniqueName(t)
	p := startServe(t, "redis://127.0.0.1:1/0", "--cluster", strings.Join(cl.Addrs()[:2], ","),
		"--config", serveConfig(t, domain, serveDescriptors))
	serveOnTopology(ctx, t, p, rdb, domain, 8)
}

// Issue 38: serve with --sentinel reaches the master through the
// sentinels and counts as on one server.
func TestServeSentinel(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	s := redistest.StartSentinel(ctx, t)
	rdb := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: s.MasterName(), SentinelAddrs: s.SentinelAddrs()})
	defer rdb.Close()
	domain := uniqueName(t)
	p := startServe(t, "redis://127.0.0.1:1/0", "--sentinel", s.MasterName()+","+strings.Join(s.SentinelAddrs(), ","),
		"--config", serveConfig(t, domain, serveDescriptors))
	serveOnTopology(ctx, t, p, rdb, domain, 3)
}

// serveOnTopology asks p for n "bulk" descriptors at once (n limiters,
// 10 per minute each) 11 times: ten are granted on every limiter, the
// 11th refused on all; each limiter's config hash holds the file's rate
// in rdb.
func serveOnTopology(ctx context.Context, t *testing.T, p *serveProc, rdb redis.UniversalClient, domain string, n int) {
	t.Helper()
	c, _ := p.client(t, nil)
	req := &rlspb.RateLimitRequest{Domain: domain}
	for i := range n {
		req.Descriptors = append(req.Descriptors, desc("bulk", fmt.Sprintf("v%d", i)))
	}
	ok := make([]string, n+1)
	over := make([]string, n+1)
	for i := range ok {
		ok[i], over[i] = "OK", "OVER_LIMIT"
	}
	for i := range 10 {
		resp := ask(t, c, req)
		require.Equal(t, ok, codesOf(resp), "request %d: %v", i, resp)
		assert.Equal(t, uint32(9-i), resp.GetStatuses()[n-1].GetLimitRemaining(), "request %d", i)
	}
	require.Equal(t, over, codesOf(ask(t, c, req)))
	slots := map[int64]bool{}
	for i := range n {
		name := fmt.Sprintf("%s:bulk_v%d", domain, i)
		assert.Equal(t, "10", rdb.HGet(ctx, name, "rate").Val(), name)
		if cc, isCluster := rdb.(*redis.ClusterClient); isCluster {
			slot, err := cc.ClusterKeySlot(ctx, name).Result()
			require.NoError(t, err)
			slots[slot] = true
		}
	}
	if _, isCluster := rdb.(*redis.ClusterClient); isCluster {
		assert.Greater(t, len(slots), 1, "the limiters lie in more than one slot")
	}
}
