package main_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goredisson/ratelimiter/wire"
)

// inspect, watch and the exporter show who holds a limiter's window: the
// records of each Go Client by its tag (two CLI processes are two
// Clients), Redisson's unmarked records as one writer.
func TestWindowByWriter(t *testing.T) {
	rdb := newRedis(t)
	ctx := context.Background()
	name := uniqueName(t)
	ok(t, cli(t, "set-rate", name, "--rate", "10", "--interval", "1h"))
	ok(t, cli(t, "acquire", name, "-n", "2"))
	ok(t, cli(t, "acquire", name, "-n", "3"))
	// What Redisson 3.21+ writes for acquire(4): 16 random bytes, no mark.
	random := make([]byte, 16)
	_, _ = rand.Read(random)
	m, err := wire.Encode(wire.Bc0I, random, 4)
	require.NoError(t, err)
	require.NoError(t, rdb.ZAdd(ctx, "{"+name+"}:permits", redis.Z{Score: float64(time.Now().UnixMilli()), Member: m}).Err())
	require.NoError(t, rdb.DecrBy(ctx, "{"+name+"}:value", 4).Err())

	var in inspection
	r := ok(t, cli(t, "inspect", name, "-o", "json"))
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &in), r.stdout)
	require.Len(t, in.Budgets, 1)
	ws := in.Budgets[0].Writers
	require.Len(t, ws, 3, "%+v", ws)
	assert.Equal(t, writerShare{Writer: "redisson", Permits: 4, Records: 1}, ws[0])
	for i, want := range []int64{3, 2} {
		assert.Regexp(t, `^go:[0-9a-f]{8}$`, ws[i+1].Writer)
		assert.Equal(t, want, ws[i+1].Permits)
	}
	assert.NotEqual(t, ws[1].Writer, ws[2].Writer, "two processes, two Clients, two tags")

	text := ok(t, cli(t, "inspect", name)).stdout
	assert.Contains(t, text, "window by writer: redisson 4 (44%), "+ws[1].Writer+" 3 (33%), "+ws[2].Writer+" 2 (22%)")

	var line struct {
		Writers []writerShare `json:"writers"`
	}
	r = ok(t, cli(t, "watch", name, "--count", "1", "-o", "json"))
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &line), r.stdout)
	assert.Equal(t, ws, line.Writers)
	assert.Contains(t, ok(t, cli(t, "watch", name, "--count", "1")).stdout, "redisson 44%  go 56% (2 clients)")

	got := scrape(t, startExporter(t, "--match", name))
	q := strconv.Quote(name)
	assert.Equal(t, 5.0, got[`ratelimiter_window_permits_by_writer{limiter=`+q+`,writer="go"}`])
	assert.Equal(t, 4.0, got[`ratelimiter_window_permits_by_writer{limiter=`+q+`,writer="redisson"}`])
}
