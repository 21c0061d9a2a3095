package main_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goredisson/ratelimiter/wire"
)

type explanationJSON struct {
	Name      string `json:"name"`
	Available int64  `json:"available"`
	Granted   bool   `json:"granted_now"`
	WaitMS    int64  `json:"wait_ms"`
	Binds     bool   `json:"binds"`
	Blocking  []struct {
		Permits  uint32 `json:"permits"`
		Writer   string `json:"writer"`
		ScoreMS  int64  `json:"score_ms"`
		LeavesAt time.Time
		InMS     int64 `json:"in_ms"`
	} `json:"blocking"`
}

// redissonRecord adds what Redisson 3.21+ writes for acquire(n) at score
// ms: an unmarked record, and the value (which must exist) lowered by n.
func redissonRecord(t *testing.T, rdb *redis.Client, name string, n uint32, ms int64) {
	t.Helper()
	random := make([]byte, 16)
	_, _ = rand.Read(random)
	m, err := wire.Encode(wire.Bc0I, random, n)
	require.NoError(t, err)
	ctx := context.Background()
	require.NoError(t, rdb.ZAdd(ctx, "{"+name+"}:permits", redis.Z{Score: float64(ms), Member: m}).Err())
	require.NoError(t, rdb.DecrBy(ctx, "{"+name+"}:value", int64(n)).Err())
}

// explain names the records that hold what an ask needs, oldest first,
// with their writers and when each leaves; it exits 0 when the ask would
// be granted now and 1 when it would wait; with several names, the one
// that waits longest binds.
func TestExplain(t *testing.T) {
	rdb := newRedis(t)
	name := uniqueName(t)
	ok(t, cli(t, "set-rate", name, "--rate", "5", "--interval", "1h"))
	ok(t, cli(t, "acquire", name, "-n", "3"))
	old := time.Now().Add(-10 * time.Minute).UnixMilli()
	redissonRecord(t, rdb, name, 2, old) // the oldest: leaves in about 50 minutes

	r := cli(t, "explain", name, "-n", "2", "-o", "json")
	failsWith(t, 1, r)
	var e explanationJSON
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &e), r.stdout)
	assert.Equal(t, int64(0), e.Available)
	assert.False(t, e.Granted)
	require.Len(t, e.Blocking, 1, "the oldest record frees 2")
	assert.Equal(t, "redisson", e.Blocking[0].Writer)
	assert.Equal(t, old, e.Blocking[0].ScoreMS)
	assert.InDelta(t, 50*time.Minute.Milliseconds(), e.WaitMS, float64(time.Minute.Milliseconds()))

	r = cli(t, "explain", name, "-n", "4")
	failsWith(t, 1, r)
	assert.Contains(t, r.stdout, "0 of 5 available, 4 asked: refused now")
	assert.Contains(t, r.stdout, "redisson")
	assert.Regexp(t, `go:[0-9a-f]{8}`, r.stdout, "the Go record is the second blocker")
	assert.Contains(t, r.stdout, "granted in 59m")

	free := uniqueName(t)
	ok(t, cli(t, "set-rate", free, "--rate", "5", "--interval", "1h"))
	assert.Contains(t, ok(t, cli(t, "explain", free, "-n", "5")).stdout, "5 of 5 available: 5 granted now")
	r = cli(t, "explain", free, name, "-n", "2", "-o", "json")
	failsWith(t, 1, r)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	require.Len(t, lines, 2)
	var a, b explanationJSON
	require.NoError(t, json.Unmarshal([]byte(lines[0]), &a))
	require.NoError(t, json.Unmarshal([]byte(lines[1]), &b))
	assert.True(t, a.Granted && !a.Binds)
	assert.True(t, !b.Granted && b.Binds, "the spent limiter binds")

	failsWith(t, 2, cli(t, "explain", name, "-n", "6"))
	failsWith(t, 1, cli(t, "explain", uniqueName(t), "-n", "1")) // not configured
	// With several names, the message names the one not configured (it
	// named the first).
	r = failsWith(t, 1, cli(t, "explain", name, name+"-missing"))
	assert.Equal(t, "ratelimiter explain: limiter \""+name+"-missing\" is not configured (set-rate or try-set-rate first)\n", r.stderr)
}
