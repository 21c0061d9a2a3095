package main_test

import (
	"context"
	"encoding/json"
	"math"
	"net"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goredisson/ratelimiter/internal/redistest"
)

// set-rate writes the four config fields and the keep-alive TTL; config
// reads them back as a table and as JSON, with global flags before or
// after the subcommand.
func TestSetRateAndConfig(t *testing.T) {
	rdb := newRedis(t)
	ctx := context.Background()
	name := uniqueName(t)
	r := ok(t, cli(t, "set-rate", name, "--rate", "10", "--interval", "1s", "--keep-alive", "1m"))
	assert.Equal(t, name+" set: 10 permits per 1s, overall, keep-alive 1m0s\n", r.stdout)

	h, err := rdb.HGetAll(ctx, name).Result()
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"rate": "10", "interval": "1000", "type": "0", "keepAliveTime": "60000"}, h)
	ttl, err := rdb.PTTL(ctx, name).Result()
	require.NoError(t, err)
	assert.True(t, ttl > 50*time.Second && ttl <= time.Minute, "ttl %v", ttl)

	r = ok(t, cli(t, "config", name))
	assert.Contains(t, r.stdout, "rate        10\n")
	assert.Contains(t, r.stdout, "interval    1s\n")
	assert.Contains(t, r.stdout, "keep-alive  1m0s\n")

	for _, args := range [][]string{{"-o", "json", "config", name}, {"config", name, "-o", "json"}, {"config", "-o", "json", name}} {
		r = ok(t, cli(t, args...))
		var got map[string]any
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &got), r.stdout)
		assert.Equal(t, map[string]any{"name": name, "exists": true, "mode": "overall", "rate": 10.0,
			"interval_ms": 1000.0, "keep_alive_ms": 60000.0}, got, "args %v", args)
	}

	// A missing limiter: exit 1, exists false.
	r = failsWith(t, 1, cli(t, "config", name+"-missing", "-o", "json"))
	assert.JSONEq(t, `{"name":"`+name+`-missing","exists":false}`, r.stdout)
}

// try-set-rate configures once; on a configured limiter it exits 1 and
// leaves the config as it was.
func TestTrySetRate(t *testing.T) {
	rdb := newRedis(t)
	name := uniqueName(t)
	ok(t, cli(t, "try-set-rate", name, "--rate", "7", "--interval", "2s", "--mode", "per-client"))
	r := failsWith(t, 1, cli(t, "try-set-rate", name, "--rate", "99", "--interval", "5s"))
	assert.Equal(t, name+" already configured, unchanged\n", r.stdout)
	h, err := rdb.HGetAll(context.Background(), name).Result()
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"rate": "7", "interval": "2000", "type": "1", "keepAliveTime": "0"}, h)
}

// update-rate needs an existing limiter; --keep-state keeps the permits
// taken in the window, without it the state is reset.
func TestUpdateRate(t *testing.T) {
	rdb := newRedis(t)
	ctx := context.Background()
	name := uniqueName(t)
	r := failsWith(t, 1, cli(t, "update-rate", name, "--rate", "5", "--interval", "1m"))
	assert.Equal(t, name+" does not exist, nothing changed\n", r.stdout)
	n, err := rdb.Exists(ctx, name).Result()
	require.NoError(t, err)
	assert.Zero(t, n, "update-rate must not create the limiter")

	ok(t, cli(t, "set-rate", name, "--rate", "5", "--interval", "1m"))
	ok(t, cli(t, "acquire", name, "-n", "3"))
	ok(t, cli(t, "update-rate", name, "--rate", "10", "--interval", "1m", "--keep-state"))
	v, err := rdb.Get(ctx, "{"+name+"}:value").Result()
	require.NoError(t, err)
	assert.Equal(t, "7", v, "10 minus the 3 permits still in the window")
	assert.Equal(t, "10", rdb.HGet(ctx, name, "rate").Val())

	ok(t, cli(t, "update-rate", name, "--rate", "4", "--interval", "1m"))
	n, err = rdb.Exists(ctx, "{"+name+"}:value", "{"+name+"}:permits").Result()
	require.NoError(t, err)
	assert.Zero(t, n, "without --keep-state the state is reset")
}

// set-rate's messages name what is wrong; --version prints the build.
func TestUsageMessages(t *testing.T) {
	name := uniqueName(t)
	r := failsWith(t, 2, cliOffline(t, "set-rate", name, "--rate", "0", "--interval", "1s"))
	assert.Contains(t, r.stderr, "--rate must be at least 1, got 0")
	r = failsWith(t, 2, cliOffline(t, "set-rate", name, "--rate", "5"))
	assert.Contains(t, r.stderr, "--interval is required")
	r = failsWith(t, 2, cliOffline(t, "set-rate", name))
	assert.Contains(t, r.stderr, "--rate and --interval are required")
	for _, args := range [][]string{{"--version"}, {"version"}} {
		r = ok(t, cliOffline(t, args...))
		assert.Regexp(t, `^ratelimiter \S+ \(.*go1\.\d+`, r.stdout, args)
	}
}

// acquire, release and available, with the refusals' exit codes and the
// records they leave in Redis.
func TestAcquireReleaseAvailable(t *testing.T) {
	rdb := newRedis(t)
	ctx := context.Background()
	name := uniqueName(t)
	r := failsWith(t, 1, cli(t, "acquire", name))
	assert.Contains(t, r.stderr, "not configured")

	ok(t, cli(t, "set-rate", name, "--rate", "3", "--interval", "1m"))
	r = ok(t, cli(t, "acquire", name, "-n", "2"))
	assert.Equal(t, "granted 2\n", r.stdout)
	recs, err := rdb.ZRange(ctx, "{"+name+"}:permits", 0, -1).Result()
	require.NoError(t, err)
	require.Len(t, recs, 1)
	assert.Len(t, recs[0], 21)
	assert.Equal(t, byte(2), recs[0][17], "the record holds 2 permits")

	r = failsWith(t, 1, cli(t, "acquire", name, "-n", "2", "-o", "json"))
	var got struct {
		Granted    bool  `json:"granted"`
		RetryAfter int64 `json:"retry_after_ms"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &got), r.stdout)
	assert.False(t, got.Granted)
	assert.True(t, got.RetryAfter > 50_000 && got.RetryAfter <= 60_003, "hint %d", got.RetryAfter)
	assert.Equal(t, "1", rdb.Get(ctx, "{"+name+"}:value").Val(), "a refusal takes nothing")

	r = failsWith(t, 2, cli(t, "acquire", name, "-n", "4")) // more than the rate: a usage error
	assert.Contains(t, r.stderr, "more permits than the limiter's rate")

	ok(t, cli(t, "release", name, "-n", "1"))
	assert.Equal(t, "2", rdb.Get(ctx, "{"+name+"}:value").Val())
	r = ok(t, cli(t, "available", name))
	assert.Equal(t, "2\n", r.stdout)
	r = ok(t, cli(t, "available", name, "-o", "json"))
	assert.JSONEq(t, `{"name":"`+name+`","available":2}`, r.stdout)
}

// acquire --timeout waits for a permit instead of refusing.
func TestAcquireTimeoutWaits(t *testing.T) {
	rdb := newRedis(t)
	ctx := context.Background()
	name := uniqueName(t)
	ok(t, cli(t, "set-rate", name, "--rate", "1", "--interval", "300ms"))
	ok(t, cli(t, "acquire", name))
	first, err := rdb.ZRangeWithScores(ctx, "{"+name+"}:permits", 0, -1).Result()
	require.NoError(t, err)
	require.Len(t, first, 1)
	ok(t, cli(t, "acquire", name, "--timeout", "10s"))
	second, err := rdb.ZRangeWithScores(ctx, "{"+name+"}:permits", 0, -1).Result()
	require.NoError(t, err)
	require.Len(t, second, 1)
	assert.GreaterOrEqual(t, second[0].Score-first[0].Score, 300.0)

	// A timeout shorter than the wait gives up at once: exit 1.
	ok(t, cli(t, "set-rate", name, "--rate", "1", "--interval", "1h"))
	ok(t, cli(t, "acquire", name))
	r := failsWith(t, 1, cli(t, "acquire", name, "--timeout", "100ms"))
	assert.Equal(t, "refused within 100ms\n", r.stdout)
}

// expire (--ttl/--at with conditions), ttl, persist, exists and delete,
// checked against every key's PTTL and existence.
func TestExpiryAndDeletion(t *testing.T) {
	rdb := newRedis(t)
	ctx := context.Background()
	name := uniqueName(t)
	keys := []string{name, "{" + name + "}:value", "{" + name + "}:permits"}
	ok(t, cli(t, "set-rate", name, "--rate", "5", "--interval", "1m"))
	ok(t, cli(t, "acquire", name))

	r := ok(t, cli(t, "ttl", name))
	assert.Equal(t, "none\n", r.stdout)
	ok(t, cli(t, "expire", name, "--ttl", "10m"))
	for _, k := range keys {
		d := rdb.PTTL(ctx, k).Val()
		assert.True(t, d > 9*time.Minute && d <= 10*time.Minute, "%s: %v", k, d)
	}
	r = ok(t, cli(t, "ttl", name, "-o", "json"))
	var ttl struct {
		TTL int64 `json:"ttl_ms"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &ttl))
	assert.True(t, ttl.TTL > 500_000 && ttl.TTL <= 600_000, "%d", ttl.TTL)

	failsWith(t, 1, cli(t, "expire", name, "--ttl", "1h", "--nx")) // all have a TTL
	failsWith(t, 1, cli(t, "expire", name, "--ttl", "1m", "--gt")) // not later
	ok(t, cli(t, "expire", name, "--ttl", "1h", "--gt"))
	assert.Greater(t, rdb.PTTL(ctx, name).Val(), 50*time.Minute)

	at := time.Now().Add(2 * time.Hour)
	ok(t, cli(t, "expire", name, "--at", strconv.FormatInt(at.UnixMilli(), 10)))
	assertExpiresAt(t, rdb, name, at)
	at = at.Add(time.Hour).Truncate(time.Second)
	ok(t, cli(t, "expire", name, "--at", at.UTC().Format(time.RFC3339), "--xx"))
	assertExpiresAt(t, rdb, "{"+name+"}:permits", at)

	ok(t, cli(t, "persist", name))
	for _, k := range keys {
		assert.Equal(t, time.Duration(-1), rdb.PTTL(ctx, k).Val(), k)
	}
	failsWith(t, 1, cli(t, "persist", name))

	r = ok(t, cli(t, "exists", name))
	assert.Equal(t, "true\n", r.stdout)
	ok(t, cli(t, "delete", name))
	n, err := rdb.Exists(ctx, keys...).Result()
	require.NoError(t, err)
	assert.Zero(t, n)
	r = failsWith(t, 1, cli(t, "exists", name, "-o", "json"))
	assert.JSONEq(t, `{"name":"`+name+`","exists":false}`, r.stdout)
	failsWith(t, 1, cli(t, "delete", name))
	failsWith(t, 1, cli(t, "ttl", name))
}

// Bad input exits 2 with one line on stderr before anything reaches Redis.
func TestUsageErrors(t *testing.T) {
	rdb := newRedis(t)
	name := uniqueName(t)
	cases := [][]string{
		{},
		{"frobnicate", name},
		{"config"},
		{"config", name, "extra"},
		{"config", name, "--bogus"},
		{"set-rate", name},
		{"set-rate", name, "--rate", "0", "--interval", "1s"},
		{"set-rate", name, "--rate", "5", "--interval", "1us"},
		{"set-rate", name, "--rate", "5", "--interval", "1m", "--keep-alive", "1s"},
		{"set-rate", name, "--rate", "5", "--interval", "1s", "--mode", "sideways"},
		{"set-rate", name, "--rate", "five", "--interval", "1s"},
		{"acquire", name, "-n", "0"},
		{"acquire", name, "-n", "4294967296"},
		{"acquire", name, "--timeout", "-1s"},
		{"release", name, "-n", "-1"},
		{"expire", name},
		{"expire", name, "--ttl", "1m", "--at", "0"},
		{"expire", name, "--ttl", "1m", "--nx", "--xx"},
		{"expire", name, "--at", "tomorrow"},
		{"config", name, "-o", "yaml"},
		{"acquire", name, "--format", "v2"},
		{"config", name, "--cluster", "a:1", "--sentinel", "m,b:2"},
		{"config", name, "--sentinel", "mymaster"},
		{"watch", name, "--count", "-1"},
		{"--url", "http://nope", "config", name},
	}
	before := rdb.DBSize(context.Background()).Val()
	for _, args := range cases {
		r := cli(t, args...)
		assert.Equal(t, 2, r.code, "%v: stdout %q stderr %q", args, r.stdout, r.stderr)
		if len(args) > 0 {
			assert.Equal(t, 1, strings.Count(r.stderr, "\n"), "%v: stderr %q", args, r.stderr)
		}
		assert.Empty(t, r.stdout, "%v", args)
	}
	assert.Equal(t, before, rdb.DBSize(context.Background()).Val(), "nothing may reach Redis")

	// -h prints the flags on stdout and exits 0.
	r := ok(t, cli(t, "set-rate", "-h"))
	assert.Contains(t, r.stdout, "-keep-state")
	// A name that starts with '-' goes after "--".
	ok(t, cli(t, "set-rate", "--rate", "1", "--interval", "1s", "--", "-"+name))
	assert.Equal(t, int64(1), rdb.Exists(context.Background(), "-"+name).Val())
}

// The demo subcommand keeps its own flags; a --url before it is passed on.
func TestDemoStillRuns(t *testing.T) {
	redistest.Need(t)
	t.Parallel()
	name := uniqueName(t)
	r := ok(t, cliEnv(t, nil, "--url", "redis://"+redisAddr+"/0", "demo", "--name", name,
		"--rate", "5", "--interval", "1s", "--workers", "2", "--duration", "1200ms"))
	assert.Contains(t, r.stdout, "total granted")
	assert.Equal(t, "5", newRedis(t).HGet(context.Background(), name, "rate").Val())
}

// --name-prefix maps names like a Redisson NameMapper that adds a prefix.
func TestNamePrefix(t *testing.T) {
	rdb := newRedis(t)
	name := uniqueName(t)
	ok(t, cli(t, "--name-prefix", "tenant1:", "set-rate", name, "--rate", "3", "--interval", "1m"))
	ok(t, cli(t, "acquire", name, "--name-prefix", "tenant1:"))
	assert.Equal(t, "3", rdb.HGet(context.Background(), "tenant1:"+name, "rate").Val())
	assert.Equal(t, "2", rdb.Get(context.Background(), "{tenant1:"+name+"}:value").Val())
	failsWith(t, 1, cli(t, "config", name)) // without the prefix: another limiter
	r := ok(t, cli(t, "inspect", name, "--name-prefix", "tenant1:", "-o", "json"))
	assert.Contains(t, r.stdout, `"config_key":"tenant1:`+name+`"`)
}

// Per-client limiters: available, acquire and release need --client-id
// (exit 2, no key written); with it they use that client's keys.
func TestPerClientNeedsClientID(t *testing.T) {
	rdb := newRedis(t)
	ctx := context.Background()
	name := uniqueName(t)
	r := ok(t, cli(t, "set-rate", name, "--rate", "4", "--interval", "1m", "--mode", "per-client", "-o", "json"))
	assert.JSONEq(t, `{"name":"`+name+`","done":true,"result":"set","config":{"name":"`+name+`","exists":true,"mode":"per-client","rate":4,"interval_ms":60000}}`, r.stdout)
	before := rdb.DBSize(ctx).Val()
	for _, args := range [][]string{{"available", name}, {"acquire", name}, {"release", name, "-n", "1"},
		{"update-rate", name, "--rate", "4", "--interval", "1m", "--mode", "per-client", "--keep-state"}} {
		r := failsWith(t, 2, cli(t, args...))
		assert.Contains(t, r.stderr, "--client-id", "%v", args)
	}
	assert.Equal(t, before, rdb.DBSize(ctx).Val(), "no key written")
	ok(t, cli(t, "acquire", name, "-n", "3", "--client-id", "w1"))
	r = ok(t, cli(t, "available", name, "--client-id", "w1"))
	assert.Equal(t, "1\n", r.stdout)
	assert.Equal(t, "1", rdb.Get(ctx, "{"+name+"}:value:w1").Val())
	ok(t, cli(t, "update-rate", name, "--rate", "6", "--interval", "1m", "--mode", "per-client", "--keep-state", "--client-id", "w1"))
	assert.Equal(t, "3", rdb.Get(ctx, "{"+name+"}:value:w1").Val())

	r = failsWith(t, 1, cli(t, "try-set-rate", name, "--rate", "9", "--interval", "1s", "-o", "json"))
	assert.JSONEq(t, `{"name":"`+name+`","done":false,"result":"already configured, unchanged"}`, r.stdout)
}

// expire --at refuses a time that is not in the future (Redis would delete
// the limiter while the command said "TTL set"), negative epoch
// milliseconds included, and changes nothing; the latest epoch millisecond
// is set and ttl shows it without wrapping around.
func TestExpireAtRefusesPast(t *testing.T) {
	rdb := newRedis(t)
	ctx := context.Background()
	name := uniqueName(t)
	ok(t, cli(t, "set-rate", name, "--rate", "5", "--interval", "1m"))
	for _, at := range []string{"-5", "0", strconv.FormatInt(time.Now().Add(-time.Second).UnixMilli(), 10), "1970-01-01T00:00:00Z"} {
		r := failsWith(t, 2, cli(t, "expire", name, "--at", at))
		assert.Contains(t, r.stderr, "not in the future", at)
		assert.Empty(t, r.stdout)
		assert.Equal(t, int64(1), rdb.Exists(ctx, name).Val(), "--at %s deleted the limiter", at)
		assert.Equal(t, time.Duration(-1), rdb.PTTL(ctx, name).Val())
	}
	ok(t, cli(t, "expire", name, "--at", strconv.FormatInt(math.MaxInt64, 10)))
	r := ok(t, cli(t, "ttl", name, "-o", "json"))
	var ttl struct {
		TTL int64 `json:"ttl_ms"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &ttl))
	assert.Greater(t, ttl.TTL, int64(9_000_000_000_000), "the longest Duration, 292 years")
}

// acquire with several names takes from every limiter or from none (a
// composite); inspect with several names shows each; other commands take
// one name.
func TestSeveralNames(t *testing.T) {
	rdb := newRedis(t)
	ctx := context.Background()
	a, b := uniqueName(t), uniqueName(t)
	ok(t, cli(t, "set-rate", a, "--rate", "3", "--interval", "1m"))
	ok(t, cli(t, "set-rate", b, "--rate", "2", "--interval", "1h"))
	r := ok(t, cli(t, "acquire", a, b, "-n", "2"))
	assert.Equal(t, "granted 2\n", r.stdout)
	r = failsWith(t, 1, cli(t, "acquire", a, b, "-o", "json"))
	var got struct {
		Names      []string `json:"names"`
		Granted    bool     `json:"granted"`
		RetryAfter int64    `json:"retry_after_ms"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &got), r.stdout)
	assert.Equal(t, []string{a, b}, got.Names)
	assert.False(t, got.Granted)
	assert.Greater(t, got.RetryAfter, int64(59*60*1000), "the hourly limit's wait")
	assert.Equal(t, "1", rdb.Get(ctx, "{"+a+"}:value").Val(), "a refusal takes nothing from the other limiter")
	r = ok(t, cli(t, "acquire", a))
	assert.Equal(t, "granted 1\n", r.stdout)

	r = failsWith(t, 1, cli(t, "acquire", a, b+"-missing"))
	assert.Contains(t, r.stderr, `"`+b+`-missing" is not configured`)
	failsWith(t, 2, cli(t, "available", a, b))

	r = ok(t, cli(t, "inspect", a, b))
	assert.Contains(t, r.stdout, a)
	assert.Contains(t, r.stdout, b)
	r = ok(t, cli(t, "inspect", a, b, "-o", "json"))
	assert.Equal(t, 2, strings.Count(r.stdout, "\n"), "one JSON line per limiter")
	failsWith(t, 1, cli(t, "inspect", a, b+"-missing"))
}

// assertExpiresAt checks that key expires at at: exactly by PEXPIRETIME
// (Redis 7.0 and later), within 100 ms by PTTL on servers without it.
func assertExpiresAt(t *testing.T, rdb *redis.Client, key string, at time.Time) {
	t.Helper()
	ctx := context.Background()
	if d, err := rdb.PExpireTime(ctx, key).Result(); err == nil {
		assert.Equal(t, at.UnixMilli(), d.Milliseconds(), key)
		return
	}
	ttl, err := rdb.PTTL(ctx, key).Result()
	require.NoError(t, err)
	assert.InDelta(t, at.UnixMilli(), time.Now().Add(ttl).UnixMilli(), 100, key)
}

// Without --url or REDIS_URL the demo starts a redis-server of its own on
// loopback, runs on it, and stops it: the port no longer answers after.
// With no redis-server to find it exits 2 naming what to install.
func TestDemoThrowawayServer(t *testing.T) {
	redistest.Need(t)
	r := ok(t, cliEnv(t, nil, "demo", "--rate", "5", "--interval", "1s", "--workers", "2", "--duration", "1200ms"))
	m := regexp.MustCompile(`started a throwaway redis-server on (\S+)`).FindStringSubmatch(r.stdout)
	require.NotNil(t, m, "stdout %q", r.stdout)
	assert.Contains(t, r.stdout, "total granted")
	conn, err := net.DialTimeout("tcp", m[1], time.Second)
	if err == nil {
		conn.Close()
		t.Errorf("the demo's redis-server on %s still answers after the demo", m[1])
	}
	r = failsWith(t, 2, cliEnv(t, []string{"REDIS_SERVER=/nonexistent/redis-server"}, "demo", "--duration", "1s"))
	assert.Contains(t, r.stderr, "redis-server not found")
}
