package main

import (
	"context"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/goredisson/ratelimiter"
	"github.com/goredisson/ratelimiter/internal/redistest"
	"github.com/goredisson/ratelimiter/wire"
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

// counts returns the ratelimiter_* samples a snapshot's page holds, in
// the text format, with their types: the sample text before the value,
// such as name{limiter="x"}, mapped to the value; types maps each family
// to its TYPE.
func counts(t *testing.T, s *snapshot) (samples map[string]float64, types map[string]string) {
	t.Helper()
	page := pageOf(t, false, func(e *expo) { writeSnapshot(e, s) })
	samples, types = map[string]float64{}, map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(page), "\n") {
		if rest, ok := strings.CutPrefix(line, "# TYPE "); ok {
			name, typ, _ := strings.Cut(rest, " ")
			types[name] = typ
			continue
		}
		if strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		require.NoError(t, err, line)
		samples[line[:i]] = v
	}
	return samples, types
}

// The record counters are functions of Redis's records, not of who read
// last: each record is counted once, by the reading whose slice of Redis
// time [previous reading, this reading) holds its stamp, whatever the
// number of readings. Records there before the first reading are not
// counted; a record stamped after Redis's clock is counted once Redis's
// clock passes it; one stamped before the previous reading (a writer's
// clock behind) is not. A slice of more than --max-records records adds
// its records but not their permits, which
// ratelimiter_exporter_uncounted_records_total counts.
func TestCollectorCountsEachRecordOnce(t *testing.T) {
	redistest.Need(t)
	ctx := context.Background()
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	srv, err := redistest.Start(sctx)
	cancel()
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Close() })
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	over := ratelimiter.NewClient(rdb).Limiter("over")
	_, err = over.TrySetRate(ctx, ratelimiter.Config{Rate: 1000, Interval: time.Hour})
	require.NoError(t, err)
	alice := ratelimiter.NewClient(rdb, ratelimiter.WithClientID("alice")).Limiter("pc")
	_, err = alice.TrySetRate(ctx, ratelimiter.Config{Rate: 1000, Interval: time.Hour, Mode: ratelimiter.PerClient})
	require.NoError(t, err)
	take := func(l *ratelimiter.Limiter, permits ...int64) {
		t.Helper()
		for _, n := range permits {
			granted, err := l.TryAcquire(ctx, n)
			require.NoError(t, err)
			require.True(t, granted)
		}
		// Redis's TIME of the next reading is then a later millisecond
		// than these records' stamps.
		time.Sleep(3 * time.Millisecond)
	}
	take(over, 7)
	take(alice, 1)

	x := &exporter{
		rdb: rdb, ctx: ctx,
		f:      exporterFlags{match: []string{"*"}, collectTimeout: 10 * time.Second, maxLimiters: 10, maxClients: 10, maxScans: 10, scanCount: 100, maxRecords: 100, idle: time.Hour},
		logf:   t.Logf,
		redact: func(err error) string { return err.Error() },
	}
	const (
		overRecords  = `ratelimiter_permit_records_total{limiter="over"}`
		overPermits  = `ratelimiter_recorded_permits_total{limiter="over"}`
		aliceRecords = `ratelimiter_permit_records_total{client="alice",limiter="pc"}`
		alicePermits = `ratelimiter_recorded_permits_total{client="alice",limiter="pc"}`
		uncounted    = "ratelimiter_exporter_uncounted_records_total"
	)
	read := func() map[string]float64 {
		t.Helper()
		s := x.reading(time.Now())
		require.NotNil(t, s.c)
		got, types := counts(t, s)
		for _, f := range []string{"ratelimiter_permit_records_total", "ratelimiter_recorded_permits_total", uncounted} {
			require.Equal(t, "counter", types[f], f)
		}
		return got
	}
	want := func(got map[string]float64, kv ...any) {
		t.Helper()
		for i := 0; i < len(kv); i += 2 {
			require.Equal(t, kv[i+1], got[kv[i].(string)], kv[i])
		}
	}

	want(read(), overRecords, 0.0, overPermits, 0.0, aliceRecords, 0.0, alicePermits, 0.0, uncounted, 0.0)
	take(over, 4, 1)
	take(alice, 2)
	want(read(), overRecords, 2.0, overPermits, 5.0, aliceRecords, 1.0, alicePermits, 2.0)
	for range 3 {
		want(read(), overRecords, 2.0, overPermits, 5.0, aliceRecords, 1.0, alicePermits, 2.0)
	}

	// Redisson's acquire(2) stamped 1 s before Redis's clock and its
	// acquire(3) 300 ms after it.
	nowMS := func() int64 {
		tm, err := rdb.Time(ctx).Result()
		require.NoError(t, err)
		return tm.UnixMilli()
	}
	for _, r := range []struct {
		permits uint32
		at      int64
	}{{2, nowMS() - 1000}, {3, nowMS() + 300}} {
		m, err := wire.Encode(wire.Bc0I, []byte(strings.Repeat(strconv.Itoa(int(r.permits)), 16)), r.permits)
		require.NoError(t, err)
		require.NoError(t, rdb.ZAdd(ctx, "{over}:permits", redis.Z{Score: float64(r.at), Member: m}).Err())
	}
	want(read(), overRecords, 2.0, overPermits, 5.0)
	time.Sleep(350 * time.Millisecond)
	want(read(), overRecords, 3.0, overPermits, 8.0)
	want(read(), overRecords, 3.0, overPermits, 8.0)

	x.f.maxRecords = 2
	take(over, 1, 1, 1)
	want(read(), overRecords, 6.0, overPermits, 8.0, uncounted, 3.0)
	take(over, 1, 1)
	want(read(), overRecords, 8.0, overPermits, 10.0, uncounted, 3.0)

	// A reading whose Redis time is not past the greatest one so far (a
	// clock stepped back) counts nothing and keeps that time.
	x.prevMS += time.Hour.Milliseconds()
	ahead := x.prevMS
	take(over, 5)
	want(read(), overRecords, 8.0, overPermits, 10.0)
	require.Equal(t, ahead, x.prevMS)
	x.prevMS = nowMS() - 1

	// A budget a reading leaves out is forgotten: read again, it starts
	// from zero (a counter reset) and counts its slice.
	x.f.match = []string{"pc"}
	got := read()
	require.NotContains(t, got, overRecords)
	want(got, aliceRecords, 1.0, alicePermits, 2.0)
	take(over, 6)
	x.f.match = []string{"*"}
	want(read(), overRecords, 1.0, overPermits, 6.0, aliceRecords, 1.0, alicePermits, 2.0)
}
