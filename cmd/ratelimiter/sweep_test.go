package main_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"sort"
	"strconv"
	"strings"
	"sync"
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
	// A limiter listed before its first grant and used by the time the
	// script ran is skipped: exit 1, which says so.
	if r.code == 1 {
		require.Contains(t, r.stderr, "skipped, used or given a TTL since listed")
	} else {
		require.Equal(t, 0, r.code, r.stderr)
	}
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

// holdScripts starts a TCP proxy to the Redis at upstream that, the first
// time a client sends a script (EVALSHA or EVAL), runs hook before it
// passes the script on; it returns the proxy's address.
func holdScripts(t *testing.T, upstream string, hook func()) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	var once sync.Once
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				u, err := net.Dial("tcp", upstream)
				if err != nil {
					return
				}
				defer u.Close()
				go func() {
					_, _ = io.Copy(c, u)
					c.Close()
				}()
				buf := make([]byte, 64<<10)
				for {
					n, err := c.Read(buf)
					if n > 0 {
						if lower := bytes.ToLower(buf[:n]); bytes.Contains(lower, []byte("\r\nevalsha\r\n")) || bytes.Contains(lower, []byte("\r\neval\r\n")) {
							once.Do(hook)
						}
						if _, err := u.Write(buf[:n]); err != nil {
							return
						}
					}
					if err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// Issue 37, item 3: sweep --apply that skips an idle limiter (here one
// given a TTL between the listing and the script that acts on it: a proxy
// holds the script until the test has set the TTL) exits 1 and says why
// on stderr; the limiter keeps the TTL it was given.
func TestSweepSkippedExits1(t *testing.T) {
	ctx := context.Background()
	rdb := newRedis(t)
	name := uniqueName(t)
	ok(t, cli(t, "set-rate", name, "--rate", "5", "--interval", "1m"))
	hookErr := make(chan error, 1)
	proxy := holdScripts(t, redisAddr, func() { hookErr <- rdb.PExpire(ctx, name, time.Hour).Err() })
	r := cliEnv(t, []string{"REDIS_URL=redis://" + proxy + "/0"}, "sweep", "--match", name, "--apply", "--delete", "-o", "json")
	select {
	case err := <-hookErr:
		require.NoError(t, err)
	case <-time.After(5 * time.Second):
		t.Fatalf("the proxy saw no script: stdout %q stderr %q", r.stdout, r.stderr)
	}
	failsWith(t, 1, r)
	assert.Equal(t, "skipped: given a TTL or deleted meanwhile", sweepReport(t, r)[name].Action)
	assert.Equal(t, "ratelimiter sweep: not all done: 1 idle limiter skipped, used or given a TTL since listed (run sweep again)\n", r.stderr)
	d, err := rdb.PTTL(ctx, name).Result()
	require.NoError(t, err)
	assert.True(t, d > 59*time.Minute, "the TTL the test gave, not deleted: %v", d)
	// Run again, nothing is idle: exit 0.
	ok(t, cli(t, "sweep", "--match", name, "--apply", "--delete"))
}

// Issue 37, item 3: a sweep that stopped at --max-limiters did not look
// at every limiter it was asked to: it exits 1 and says so on stderr, dry
// run or --apply; what it examined it lists (and acts on) as usual.
func TestSweepStoppedAtBoundExits1(t *testing.T) {
	ctx := context.Background()
	rdb := newRedis(t)
	base := uniqueName(t) + "-"
	for _, n := range []string{"a", "b"} {
		ok(t, cli(t, "set-rate", base+n, "--rate", "5", "--interval", "1m"))
	}
	for _, apply := range []bool{false, true} {
		args := []string{"sweep", "--match", base + "*", "--max-limiters", "1", "-o", "json"}
		if apply {
			args = append(args, "--apply")
		}
		r := failsWith(t, 1, cli(t, args...))
		assert.Equal(t, []string{base + "a"}, keysOf(sweepReport(t, r)), "apply %v", apply)
		assert.Equal(t, "ratelimiter sweep: not all done: stopped at --max-scans or --max-limiters, some limiters not examined\n", r.stderr)
	}
	assert.Greater(t, rdb.PTTL(ctx, base+"a").Val(), time.Hour, "a given the default TTL (24h)")
	assert.Equal(t, time.Duration(-1), rdb.PTTL(ctx, base+"b").Val(), "b not examined")
}
