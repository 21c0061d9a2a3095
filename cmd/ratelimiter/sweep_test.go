package main_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goredisson/ratelimiter"
)

type sweptJSON struct {
	Name   string `json:"name"`
	IdleMS int64  `json:"idle_ms"`
	Keys   int    `json:"keys"`
	Action string `json:"action"`
}

func sweepReport(t *testing.T, r result) map[string]sweptJSON {
	t.Helper()
	out := map[string]sweptJSON{}
	for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		if line == "" {
			continue
		}
		var s sweptJSON
		require.NoError(t, json.Unmarshal([]byte(line), &s), line)
		out[s.Name] = s
	}
	return out
}

// sweep lists the limiters with no TTL whose newest record (Redisson's or
// Go's, any client's) is older than --idle, or that have none; the dry run
// changes nothing; --apply gives every key of each a TTL, or deletes them.
func TestSweep(t *testing.T) {
	ctx := context.Background()
	rdb := newRedis(t)
	base := uniqueName(t) + "-"
	old := time.Now().Add(-10 * 24 * time.Hour).UnixMilli()
	for _, n := range []string{"a", "b", "c", "d"} {
		ok(t, cli(t, "set-rate", base+n, "--rate", "5", "--interval", "1h"))
	}
	// a: Redisson's acquire(1) ten days ago, nothing since.
	require.NoError(t, rdb.Set(ctx, "{"+base+"a}:value", 5, 0).Err())
	redissonRecord(t, rdb, base+"a", 1, old)
	ok(t, cli(t, "acquire", base+"b")) // used now
	ok(t, cli(t, "expire", base+"c", "--ttl", "1h"))
	// d: configured, never used.
	ok(t, cli(t, "set-rate", base+"e", "--rate", "5", "--interval", "1h", "--mode", "per-client"))
	// e: client w1's budget, used ten days ago.
	require.NoError(t, rdb.Set(ctx, "{"+base+"e}:value:w1", 5, 0).Err())
	require.NoError(t, rdb.ZAdd(ctx, "{"+base+"e}:permits:w1", redis.Z{Score: float64(old), Member: "0123456789abcdef0123456789abc"}).Err())

	before := dump(t, rdb, base+"a", "{"+base+"a}:value", "{"+base+"a}:permits", base+"d", base+"e")
	got := sweepReport(t, ok(t, cli(t, "sweep", "--match", base+"*", "--idle", "24h", "-o", "json")))
	names := keysOf(got)
	assert.Equal(t, []string{base + "a", base + "d", base + "e"}, names)
	assert.Equal(t, "none", got[base+"a"].Action)
	assert.Greater(t, got[base+"a"].IdleMS, int64(9*24*time.Hour/time.Millisecond))
	assert.Equal(t, int64(-1), got[base+"d"].IdleMS, "no record at all")
	assert.Equal(t, 5, got[base+"e"].Keys, "config, value, permits and client w1's pair")
	assert.Equal(t, before, dump(t, rdb, base+"a", "{"+base+"a}:value", "{"+base+"a}:permits", base+"d", base+"e"), "a dry run writes nothing")
	assert.Contains(t, ok(t, cli(t, "sweep", "--match", base+"*", "--idle", "24h")).stdout, "dry run: add --apply to act")

	got = sweepReport(t, ok(t, cli(t, "sweep", "--match", base+"*", "--idle", "24h", "--apply", "--ttl", "1h", "-o", "json")))
	assert.Equal(t, "ttl", got[base+"e"].Action)
	for _, k := range []string{base + "a", "{" + base + "a}:permits", base + "e", "{" + base + "e}:permits:w1", base + "d"} {
		d, err := rdb.PTTL(ctx, k).Result()
		require.NoError(t, err)
		assert.True(t, d > 59*time.Minute && d <= time.Hour, "%s: TTL %v", k, d)
	}
	d, err := rdb.PTTL(ctx, base+"b").Result()
	require.NoError(t, err)
	assert.Equal(t, time.Duration(-1), d, "b is in use: untouched")

	ok(t, cli(t, "persist", base+"d"))
	got = sweepReport(t, ok(t, cli(t, "sweep", "--match", base+"d", "--idle", "24h", "--apply", "--delete", "-o", "json")))
	assert.Equal(t, "deleted", got[base+"d"].Action)
	n, err := rdb.Exists(ctx, base+"d").Result()
	require.NoError(t, err)
	assert.Zero(t, n)
	failsWith(t, 2, cli(t, "sweep", "--idle", "0s"))

	// The exporter counts them: a (now with a TTL) and d (deleted) no
	// longer; b is in use, c has a TTL, e has one now.
	ok(t, cli(t, "persist", base+"e"))
	page := scrape(t, startExporter(t, "--match", base+"*", "--idle", "24h"))
	assert.Equal(t, 1.0, page["ratelimiter_idle_limiters"], "e again, without its TTL")
}

func keysOf(m map[string]sweptJSON) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Issue 39, item 3: a limiter called every 20 ms by a writer whose clock
// leads Redis's by 50 ms (its records are stamped after Redis's TIME)
// survives sweep --apply --delete at the default --idle, run again and
// again while it is called; none of its calls fails.
func TestSweepKeepsLimiterStampedAhead(t *testing.T) {
	ctx := context.Background()
	rdb := newRedis(t)
	name := uniqueName(t)
	ok(t, cli(t, "set-rate", name, "--rate", "100000", "--interval", "1s"))
	ahead := ratelimiter.NewClient(rdb, ratelimiter.WithServerClock(false),
		ratelimiter.WithClock(func() time.Time { return time.Now().Add(50 * time.Millisecond) })).Limiter(name)
	stop := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		for {
			select {
			case <-stop:
				done <- nil
				return
			case <-time.After(20 * time.Millisecond):
			}
			if _, err := ahead.TryAcquire(ctx, 1); err != nil {
				done <- err
				return
			}
		}
	}()
	time.Sleep(100 * time.Millisecond)
	for i := 0; i < 5; i++ {
		r := cli(t, "sweep", "--match", name, "--apply", "--delete", "-o", "json")
		require.Equal(t, 0, r.code, r.stderr)
		require.Empty(t, strings.TrimSpace(r.stdout), "nothing idle")
		require.Equal(t, int64(1), rdb.Exists(ctx, name).Val(), "sweep %d deleted a limiter in use", i)
	}
	close(stop)
	require.NoError(t, <-done)
}

// Issue 39, item 3: a sweep racing grants deletes nothing in use. Writers
// call 200 limiters in turn (every other one PER_CLIENT, under two client
// ids) while sweep --apply --delete runs at the default --idle; every
// limiter keeps its config and no call fails.
func TestSweepRacingGrantsDeletesNothing(t *testing.T) {
	ctx := context.Background()
	rdb := newRedis(t)
	base := uniqueName(t) + "-"
	const n = 200
	names := make([]string, n)
	p := rdb.Pipeline()
	for i := range names {
		names[i] = fmt.Sprintf("%s%03d", base, i)
		p.HSet(ctx, names[i], "rate", "100000", "interval", "1000", "type", strconv.Itoa(i%2))
	}
	_, err := p.Exec(ctx)
	require.NoError(t, err)
	stop := make(chan struct{})
	errs := make(chan error, 4)
	for w := 0; w < 4; w++ {
		client := ratelimiter.NewClient(rdb, ratelimiter.WithClientID(fmt.Sprintf("w%d", w%2)))
		go func() {
			for i := w; ; i++ {
				select {
				case <-stop:
					errs <- nil
					return
				default:
				}
				if _, err := client.Limiter(names[i%n]).TryAcquire(ctx, 1); err != nil {
					errs <- fmt.Errorf("%s: %w", names[i%n], err)
					return
				}
			}
		}()
	}
	time.Sleep(300 * time.Millisecond)
	r := cli(t, "sweep", "--match", base+"*", "--apply", "--delete", "-o", "json")
	close(stop)
	for w := 0; w < 4; w++ {
		require.NoError(t, <-errs)
	}
	require.Equal(t, 0, r.code, r.stderr)
	var lost []string
	for _, name := range names {
		if rdb.Exists(ctx, name).Val() == 0 {
			lost = append(lost, name)
		}
	}
	require.Empty(t, lost, "deleted while in use; sweep said %s", r.stdout)
}

// Issue 39, item 3: a read the user may not make is "keep", with a
// non-zero exit. Under the README's least-privilege user less ZREVRANGE,
// a limiter used just now is neither listed as idle nor deleted, and
// sweep exits 2 naming the refused command.
func TestSweepReadErrorKeeps(t *testing.T) {
	ctx := context.Background()
	rdb := newRedis(t)
	name := uniqueName(t)
	ok(t, cli(t, "set-rate", name, "--rate", "5", "--interval", "1m"))
	ok(t, cli(t, "acquire", name))
	url := readmeUser(t, redisAddr, "sweep-"+strings.ReplaceAll(name, "_", "-"), "+multi", "+exec", "+watch", "+unwatch", "-zrevrange")
	env := []string{"REDIS_URL=" + url}
	for _, args := range [][]string{
		{"sweep", "--match", name},
		{"sweep", "--match", name, "--apply", "--delete"},
	} {
		r := cliEnv(t, env, args...)
		require.Equal(t, 2, r.code, "%v: stdout %q stderr %q", args, r.stdout, r.stderr)
		require.Contains(t, r.stderr, "zrevrange", args)
		require.NotContains(t, r.stdout, "would delete", args)
		require.Equal(t, int64(1), rdb.Exists(ctx, name).Val(), "%v deleted a limiter used just now", args)
	}
}
