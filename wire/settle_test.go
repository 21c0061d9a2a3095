package wire_test

import (
	"context"
	"math/big"
	"math/rand/v2"
	"os"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/goredisson/ratelimiter"
	"github.com/goredisson/ratelimiter/internal/redistest"
	"github.com/goredisson/ratelimiter/wire"
)

var redisAddr string

func TestMain(m *testing.M) { os.Exit(redistest.Main(m, &redisAddr, nil)) }

// The bounds are the script's: read from internal/script/lua/lib.lua.
func TestBoundsMatchLua(t *testing.T) {
	lib, err := os.ReadFile("../internal/script/lua/lib.lua")
	require.NoError(t, err)
	m := regexp.MustCompile(`local EXPIRE_CHUNK, RECOUNT_MAX = (\d+), (\d+)`).FindSubmatch(lib)
	require.NotNil(t, m, "lib.lua no longer declares EXPIRE_CHUNK, RECOUNT_MAX")
	require.Equal(t, strconv.Itoa(wire.ExpireChunk), string(m[1]))
	require.Equal(t, strconv.Itoa(wire.RecountMax), string(m[2]))
	m = regexp.MustCompile(`local MAX = (\d+)`).FindSubmatch(lib)
	require.NotNil(t, m, "lib.lua no longer declares MAX")
	require.Equal(t, strconv.Itoa(wire.MaxExact), string(m[1]))
}

// The probe record and its hold in every script that settles a window are
// wire's: ProbeRecord in each format, and ProbeHold in ms.
func TestProbeRecordMatchesLua(t *testing.T) {
	for _, f := range []string{"lib.lua", "acquire.lua", "acquire_all.lua"} {
		src, err := os.ReadFile("../internal/script/lua/" + f)
		require.NoError(t, err)
		m := regexp.MustCompile(`local PROBE_B, PROBE_L, PROBE_F = '([^']*)', '([^']*)', '([^']*)'`).FindSubmatch(src)
		require.NotNil(t, m, "%s no longer declares PROBE_B, PROBE_L, PROBE_F", f)
		require.Equal(t, string(wire.ProbeRecord(wire.Bc0I)), luaString(t, string(m[1])), f)
		require.Equal(t, string(wire.ProbeRecord(wire.Lc0I)), luaString(t, string(m[2])), f)
		require.Equal(t, string(wire.ProbeRecord(wire.FI)), luaString(t, string(m[3])), f)
		m = regexp.MustCompile(`local PROBE_HOLD = (\d+)`).FindSubmatch(src)
		require.NotNil(t, m, "%s no longer declares PROBE_HOLD", f)
		require.Equal(t, strconv.FormatInt(wire.ProbeHold.Milliseconds(), 10), string(m[1]), f)
	}
}

// luaString decodes a Lua string literal's body with decimal escapes
// (\ddd) and no other escape.
func luaString(t *testing.T, s string) string {
	t.Helper()
	var out []byte
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' {
			out = append(out, s[i])
			continue
		}
		j := i + 1
		for j < len(s) && j < i+4 && s[j] >= '0' && s[j] <= '9' {
			j++
		}
		v, err := strconv.Atoi(s[i+1 : j])
		require.NoError(t, err, "escape at %d of %q", i, s)
		out, i = append(out, byte(v)), j-1
	}
	return string(out)
}

var scriptInteger = regexp.MustCompile(`^-?[0-9]+$`)

// FuzzValueOf: a value key is read as the scripts read it (an optional
// '-', digits, magnitude at most 2^53-1), whatever it holds.
func FuzzValueOf(f *testing.F) {
	for _, s := range []string{"7", "-3", "-0", "007", "2.5", "lots", "", "-", "+1", "9007199254740991", "-9007199254740992", "99999999999999999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, ok := wire.ValueOf(s)
		want := false
		if scriptInteger.MatchString(s) {
			b, _ := new(big.Int).SetString(s, 10)
			want = b.CmpAbs(big.NewInt(wire.MaxExact)) <= 0
			if want && b.Int64() != v {
				t.Fatalf("%q: %d", s, v)
			}
		}
		if ok != want {
			t.Fatalf("%q: valueOf says %v, the scripts %v", s, ok, want)
		}
	})
}

// TestSettleLikeScript: on random budgets (a value or none, records in and
// out of the window, Redisson's and this library's, counts that overflow
// the rate), wire.Settle finds what AvailablePermits returns, which runs
// internal/script/lua/lib.lua's settle(). Two budgets past the bounds (more expired
// records than ExpireChunk, more live ones than RecountMax) hold the
// bounds to the script's too.
func TestSettleLikeScript(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Client(t, redisAddr)
	now := time.Now().UnixMilli()
	lim := ratelimiter.NewClient(rdb, ratelimiter.WithServerClock(false),
		ratelimiter.WithClock(func() time.Time { return time.UnixMilli(now) }))
	rng := rand.New(rand.NewPCG(1, uint64(now)))
	const interval = 1000
	type budget struct {
		rate    int64
		value   *int64
		records []redis.Z
	}
	var cases []budget
	for i := 0; i < 300; i++ {
		b := budget{rate: 1 + rng.Int64N(20)}
		if rng.IntN(4) > 0 {
			v := rng.Int64N(3*b.rate) - b.rate
			b.value = &v
		}
		for j := rng.IntN(12); j > 0; j-- {
			m := wire.New(wire.Format(rng.IntN(3)), wire.Tag{1, 2, 3, 4}, uint32(rng.Int64N(b.rate+1)))
			if rng.IntN(2) == 0 { // Redisson's: unmarked random bytes
				m, _ = wire.Encode(wire.Bc0I, []byte(strconv.Itoa(rng.Int())), uint32(rng.IntN(4)))
			}
			score := float64(now - rng.Int64N(2*interval))
			b.records = append(b.records, redis.Z{Score: score, Member: string(m)})
		}
		if rng.IntN(3) == 0 { // the probe record, expired or not, held or not
			score := float64(now - interval - wire.ProbeHold.Milliseconds() - 20 + rng.Int64N(60))
			b.records = append(b.records, redis.Z{Score: score, Member: string(wire.ProbeRecord(wire.Format(rng.IntN(3))))})
		}
		cases = append(cases, b)
	}
	many := func(n int, score float64) []redis.Z {
		zs := make([]redis.Z, n)
		for i := range zs {
			zs[i] = redis.Z{Score: score, Member: string(wire.New(wire.Bc0I, wire.Tag{}, 1))}
		}
		return zs
	}
	v := int64(100)
	cases = append(cases,
		budget{rate: 5000, value: &v, records: many(wire.ExpireChunk+200, float64(now-2*interval))},
		budget{rate: wire.RecountMax + 50, records: many(wire.RecountMax+20, float64(now-10))})
	for i, b := range cases {
		l := lim.Limiter(redistest.Name(t) + strconv.Itoa(i))
		ok, err := l.TrySetRate(ctx, ratelimiter.Config{Rate: b.rate, Interval: interval * time.Millisecond})
		require.NoError(t, err)
		require.True(t, ok)
		k := wire.KeysFor(l.Name(), "")
		if b.value != nil {
			require.NoError(t, rdb.Set(ctx, k.Value, *b.value, 0).Err())
		}
		if len(b.records) > 0 {
			require.NoError(t, rdb.ZAdd(ctx, k.Permits, b.records...).Err())
		}
		zs, err := rdb.ZRangeWithScores(ctx, k.Permits, 0, -1).Result()
		require.NoError(t, err)
		recs := make([]wire.Record, len(zs))
		for j, z := range zs {
			recs[j] = wire.ReadRecord(z.Member.(string), z.Score)
		}
		want := wire.Settle(b.rate, b.value, recs, now-interval)
		got, err := l.AvailablePermits(ctx)
		require.NoError(t, err)
		require.Equal(t, want, got, "case %d: rate %d, value %v, %d records", i, b.rate, b.value, len(recs))
	}
}
