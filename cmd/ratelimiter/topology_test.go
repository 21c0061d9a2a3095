package main_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goredisson/ratelimiter/internal/redistest"
)

// --cluster: the commands work on a real 6-node cluster, inspect's SCAN
// covers every master, and a name whose keys would span slots is refused
// with exit 2 before anything is written.
func TestCluster(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cl := redistest.StartCluster(ctx, t)
	seeds := strings.Join(cl.Addrs()[:2], ",")
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs()})
	defer rdb.Close()

	for _, name := range []string{"cli-cluster-a", "cli-cluster-b", "{tag}cli"} {
		ok(t, cli(t, "--cluster", seeds, "set-rate", name, "--rate", "5", "--interval", "1m", "--mode", "per-client"))
		ok(t, cli(t, "acquire", name, "-n", "2", "--cluster", seeds, "--client-id", "n1"))
		ok(t, cli(t, "acquire", name, "--cluster", seeds, "--client-id", "n2"))
		assert.Equal(t, "5", rdb.HGet(ctx, name, "rate").Val())
		r := ok(t, cli(t, "inspect", name, "--cluster", seeds, "-o", "json"))
		var in inspection
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &in), r.stdout)
		assert.Equal(t, []string{"n1", "n2"}, in.Clients, name)
		ok(t, cli(t, "delete", name, "--cluster", seeds))
		assert.Zero(t, rdb.Exists(ctx, name).Val())
	}
	r := failsWith(t, 2, cli(t, "set-rate", "a{b", "--rate", "1", "--interval", "1s", "--cluster", seeds))
	assert.Contains(t, r.stderr, "slot")
	failsWith(t, 2, cli(t, "config", "x", "--cluster", seeds, "--url", "redis://127.0.0.1:1/2"))
}

// --sentinel: the commands reach the master through the sentinels.
func TestSentinel(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	s := redistest.StartSentinel(ctx, t)
	spec := s.MasterName() + "," + strings.Join(s.SentinelAddrs(), ",")
	rdb := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: s.MasterName(), SentinelAddrs: s.SentinelAddrs()})
	defer rdb.Close()
	name := uniqueName(t)
	ok(t, cli(t, "--sentinel", spec, "set-rate", name, "--rate", "3", "--interval", "1m"))
	ok(t, cli(t, "acquire", name, "--sentinel", spec))
	assert.Equal(t, "2", rdb.Get(ctx, "{"+name+"}:value").Val())
	r := ok(t, cli(t, "available", name, "--sentinel", spec))
	assert.Equal(t, "2\n", r.stdout)
	failsWith(t, 2, cli(t, "config", name, "--sentinel", "nosuchmaster,"+strings.Join(s.SentinelAddrs(), ","), "--redis-timeout", "1s"))
}
