package main

import (
	"context"
	"regexp"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/goredisson/ratelimiter"
	"github.com/goredisson/ratelimiter/internal/redistest"
)

// Concurrent scrapes share readings: with Redis paused (CLIENT PAUSE) the
// first scrape's reading blocks, the others queue behind it and then
// share one reading, so Redis sees fewer readings (TIME calls) than
// scrapes; every scrape still gets the limiter. Run in-process so that
// -race watches the exporter.
func TestCollectorSharesReadings(t *testing.T) {
	redistest.Need(t)
	ctx := context.Background()
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	srv, err := redistest.Start(sctx)
	cancel()
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Close() })
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	_, err = ratelimiter.NewClient(rdb).Limiter("shared").TrySetRate(ctx, ratelimiter.Config{Rate: 7, Interval: time.Minute})
	require.NoError(t, err)

	x := &exporter{
		rdb: rdb, ctx: ctx,
		f:      exporterFlags{match: []string{"*"}, collectTimeout: 10 * time.Second, maxLimiters: 10, maxClients: 10, maxScans: 10, scanCount: 100, maxRecords: 100, idle: time.Hour},
		logf:   t.Logf,
		redact: func(err error) string { return err.Error() },
	}

	require.NoError(t, rdb.ConfigResetStat(ctx).Err())
	require.NoError(t, rdb.Do(ctx, "CLIENT", "PAUSE", "500", "ALL").Err())
	const scrapes = 8
	var wg sync.WaitGroup
	rates := make([]float64, scrapes)
	for i := range scrapes {
		wg.Go(func() {
			if s := x.reading(time.Now()); s.c != nil && len(s.c.limiters) == 1 {
				rates[i] = float64(s.c.limiters[0].cfg.Rate)
			}
		})
	}
	wg.Wait()
	for i := range scrapes {
		require.Equal(t, 7.0, rates[i], "scrape %d", i)
	}
	stats, err := rdb.Info(ctx, "commandstats").Result()
	require.NoError(t, err)
	m := regexp.MustCompile(`cmdstat_time:calls=(\d+)`).FindStringSubmatch(stats)
	require.NotNil(t, m, stats)
	readings, err := strconv.Atoi(m[1])
	require.NoError(t, err)
	require.GreaterOrEqual(t, readings, 1)
	require.Less(t, readings, scrapes, "queued scrapes share a reading")
}
