package httplimit_test

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goredisson/ratelimiter"
	"github.com/goredisson/ratelimiter/httplimit"
)

// commandCalls reads INFO commandstats: calls per command (the commands a
// script runs included), leaving out the commands this measurement sends
// itself.
func commandCalls(t *testing.T, rdb *redis.Client) map[string]int64 {
	t.Helper()
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	require.NoError(t, err)
	calls := map[string]int64{}
	for _, line := range strings.Split(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":calls=")
		if !ok {
			continue
		}
		name = strings.TrimPrefix(name, "cmdstat_")
		if name == "info" || name == "ping" || name == "hello" || name == "client|setinfo" {
			continue
		}
		n, _, _ := strings.Cut(rest, ",")
		v, err := strconv.ParseInt(n, 10, 64)
		require.NoError(t, err)
		calls[name] = v
	}
	return calls
}

// TestRedisCommandsPerRequest counts the Redis round trips (a go-redis
// hook) and commands (INFO commandstats, the commands scripts run
// included) that the middleware sends per request once its limiter is
// configured: 100 requests on a rate of 50, half granted and half
// refused, with the RateLimit fields on. Each request is one script call
// and nothing else: no pipeline reads the state for the headers. The
// Client's background clock check is off: it would add a few calls; its
// reading of the server's clock for steps (one TIME every 10 s) shows
// in the round trips and the time command's count.
func TestRedisCommandsPerRequest(t *testing.T) {
	rdb := newRedis(t)
	lim, err := httplimit.New(rdb, ratelimiter.Config{Rate: 50, Interval: time.Minute}, httplimit.WithPrefix(prefix(t)),
		httplimit.WithClientOptions(ratelimiter.WithClockCheck(-1)))
	require.NoError(t, err)
	srv := serve(t, lim.Handler(&counting{}))
	require.Equal(t, http.StatusOK, get(t, srv.URL).StatusCode) // configures the limiter
	const requests = 100
	trips := &roundTrips{}
	rdb.AddHook(trips)
	before := commandCalls(t, rdb)
	codes := map[int]int{}
	for i := 0; i < requests; i++ {
		codes[get(t, srv.URL).StatusCode]++
	}
	after := commandCalls(t, rdb)
	require.Equal(t, map[int]int{200: 49, 429: 51}, codes)
	total := int64(0)
	t.Logf("round trips %.2f per request", float64(trips.n.Load())/requests)
	// One script call per grant and one for the first refusal: the later
	// refusals are the Client's local ones (its hint has not passed).
	assert.Equal(t, int64(codes[200]+1), trips.scripts.Load(), "script calls")
	assert.Zero(t, trips.pipelines.Load(), "pipelines")
	for name, n := range after {
		if d := n - before[name]; d > 0 {
			t.Logf("%-10s %.2f per request", name, float64(d)/requests)
			total += d
		}
	}
	t.Logf("total      %.2f commands per request", float64(total)/requests)
}

// roundTrips is a go-redis hook that counts the commands and pipelines
// sent, each one network round trip, and among them the script calls and
// the pipelines.
type roundTrips struct{ n, scripts, pipelines atomic.Int64 }

func (h *roundTrips) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *roundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		switch cmd.Name() {
		case "info":
			return next(ctx, cmd)
		case "evalsha", "eval":
			h.scripts.Add(1)
		}
		h.n.Add(1)
		return next(ctx, cmd)
	}
}

func (h *roundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if cmds[0].Name() == "client" {
			// A new connection's handshake (CLIENT SETINFO): the pool
			// grew, as it may when the Client reads the server's clock
			// beside a request (internal/script/clockstep.go).
			return next(ctx, cmds)
		}
		h.n.Add(1)
		h.pipelines.Add(1)
		return next(ctx, cmds)
	}
}
