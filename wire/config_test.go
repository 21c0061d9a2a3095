package wire_test

import (
	"context"
	"errors"
	"math"
	"math/big"
	"math/rand/v2"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/goredisson/ratelimiter/internal/redistest"
	"github.com/goredisson/ratelimiter/internal/script"
	"github.com/goredisson/ratelimiter/wire"
)

// MaxMS is the scripts' MAXMS, in every script that checks it.
func TestMaxMSMatchesLua(t *testing.T) {
	require.Equal(t, int64(math.MaxInt64/int64(time.Millisecond)), wire.MaxMS)
	want := regexp.MustCompile(`\bMAXMS = ` + strconv.FormatInt(wire.MaxMS, 10) + `\b|MAX, MAXMS = ` +
		strconv.FormatInt(wire.MaxExact, 10) + `, ` + strconv.FormatInt(wire.MaxMS, 10) + `\b`)
	for _, f := range []string{"lib.lua", "acquire.lua", "acquire_all.lua"} {
		src, err := os.ReadFile("../internal/script/lua/" + f)
		require.NoError(t, err)
		require.Regexp(t, want, string(src), "%s does not set MAXMS to %d", f, wire.MaxMS)
	}
}

var digitsOnly = regexp.MustCompile(`^[0-9]+$`)

// scriptField is the scripts' rule for a config field, written apart from
// wire.Decimal: digits only, value in [lo, hi].
func scriptField(s string, lo, hi int64) (int64, bool) {
	if !digitsOnly.MatchString(s) {
		return 0, false
	}
	v, _ := new(big.Int).SetString(s, 10)
	if v.Cmp(big.NewInt(lo)) < 0 || v.Cmp(big.NewInt(hi)) > 0 {
		return 0, false
	}
	return v.Int64(), true
}

// FuzzDecimal: a config field is read as the scripts read it (digits
// only, at most 2^53-1), whatever it holds.
func FuzzDecimal(f *testing.F) {
	for _, s := range []string{"7", "0", "007", "-3", "+1", " 1", "1 ", "2.5", "1e3", "0x10", "", "9007199254740991", "9007199254740992", "99999999999999999999", "٣"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, ok := wire.Decimal(s)
		w, want := scriptField(s, 0, wire.MaxExact)
		if ok != want || ok && v != w {
			t.Fatalf("%q: Decimal says %d, %v; the scripts %d, %v", s, v, ok, w, want)
		}
	})
}

// FuzzParseConfig: whatever a config hash holds, ParseConfig never
// panics, accepts exactly what the scripts' rule accepts, returns the
// fields it accepted, and refuses with the sentinel the scripts' error
// code maps to.
func FuzzParseConfig(f *testing.F) {
	f.Add("10", "1000", "0", "0", true, true)
	f.Add("0x10", "1000", "1", "", false, true)
	f.Add("9007199254740992", "1", "0", "", false, true)
	f.Add("1", "9007199254740991", "1", "9007199254740991", true, true)
	f.Add("1", "9223372036854", "1", "9223372036855", true, true)
	f.Add("+1", "-1", "00", " 5", true, true)
	f.Add("1", "1", "0", "", false, false)
	f.Fuzz(func(t *testing.T, rate, interval, typ, keep string, hasKeep, hasType bool) {
		h := map[string]string{"rate": rate, "interval": interval}
		if hasType {
			h["type"] = typ
		}
		if hasKeep {
			h["keepAliveTime"] = keep
		} else {
			keep = "0"
		}
		cfg, err := wire.ParseConfig(h)
		if !hasType {
			require.ErrorIs(t, err, wire.ErrConfigMissing, "%q", h)
			require.NotErrorIs(t, err, wire.ErrConfigCorrupt, "%q", h)
			return
		}
		r, ok1 := scriptField(rate, 1, wire.MaxExact)
		i, ok2 := scriptField(interval, 1, wire.MaxMS)
		k, ok3 := scriptField(keep, 0, wire.MaxMS)
		ok := ok1 && ok2 && ok3 && (typ == "0" || typ == "1")
		if ok != (err == nil) {
			t.Fatalf("%q: ParseConfig says %v, the scripts' rule %v", h, err, ok)
		}
		if !ok {
			require.ErrorIs(t, err, wire.ErrConfigCorrupt, "%q", h)
			require.NotErrorIs(t, err, wire.ErrConfigMissing, "%q", h)
			return
		}
		want := wire.Config{Type: int(typ[0] - '0'), Rate: r, Interval: time.Duration(i) * time.Millisecond, KeepAlive: time.Duration(k) * time.Millisecond}
		if cfg != want {
			t.Fatalf("%q: got %+v, want %+v", h, cfg, want)
		}
	})
}

func TestParseConfigErrors(t *testing.T) {
	_, err := wire.ParseConfig(nil)
	require.ErrorIs(t, err, wire.ErrConfigMissing)
	require.EqualError(t, err, "no field rate")

	_, err = wire.ParseConfig(map[string]string{"rate": "1", "type": "0", "keepAliveTime": "x"})
	var ce *wire.ConfigError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, wire.ConfigError{Field: "interval", Missing: true}, *ce, "a missing field is reported before a corrupt one")

	_, err = wire.ParseConfig(map[string]string{"rate": "0", "interval": "1e3", "type": "2", "keepAliveTime": "-1"})
	require.ErrorIs(t, err, wire.ErrConfigCorrupt)
	require.NotErrorIs(t, err, wire.ErrConfigMissing)
	require.Equal(t, strings.Join([]string{
		`field rate is "0", not a decimal integer in [1, 9007199254740991]`,
		`field interval is "1e3", not a decimal integer in [1, 9223372036854]`,
		`field keepAliveTime is "-1", not a decimal integer in [0, 9223372036854]`,
		`field type is "2", not 0 or 1`,
	}, "\n"), err.Error())

	cfg, err := wire.ParseConfig(map[string]string{"rate": "010", "interval": "9223372036854", "type": "1", "other": "x"})
	require.NoError(t, err)
	require.Equal(t, wire.Config{Type: 1, Rate: 10, Interval: math.MaxInt64 / time.Millisecond * time.Millisecond}, cfg)
}

// The fields, as lib.lua's limiter() reads them, against the Go rule.
const limiterProbe = `
local rate, interval, keep, valueKey = limiter()
local typ = 0
if valueKey == KEYS[3] then typ = 1 end
return {rate, interval, keep, typ}
`

// TestParseConfigLikeScript: on config hashes made of edge values (and
// fields left out), ParseConfig accepts what lib.lua's limiter() accepts,
// with the same values, and refuses what it refuses with the matching
// sentinel: ErrConfigMissing for RLNOTINIT, ErrConfigCorrupt for RLSTATE.
func TestParseConfigLikeScript(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Client(t, redisAddr)
	lib, err := os.ReadFile("../internal/script/lua/lib.lua")
	require.NoError(t, err)
	probe := redis.NewScript(script.Guarded(string(lib) + limiterProbe)) // as the library sends lib.lua: Redis 6.2 needs it
	numbers := []string{"", "0", "1", "7", "010", "0000000000000000000009", "-1", "-0", "+1", " 5", "5 ", "1e3", "0x10", "10.0", "lots",
		"9007199254740991", "9007199254740992", "9223372036854", "9223372036855", "9223372036854775807", "99999999999999999999"}
	types := []string{"0", "1", "2", "00", "-1", "", " 0", "1.0"}
	rng := rand.New(rand.NewPCG(1, 2))
	pick := func(pool []string) (string, bool) {
		if rng.IntN(8) == 0 {
			return "", false // absent
		}
		return pool[rng.IntN(len(pool))], true
	}
	keys := wire.KeysFor(redistest.Name(t), "c1")
	for i := 0; i < 400; i++ {
		h := map[string]string{}
		for _, f := range []struct {
			name string
			pool []string
		}{{"rate", numbers}, {"interval", numbers}, {"type", types}, {"keepAliveTime", numbers}} {
			if v, ok := pick(f.pool); ok {
				h[f.name] = v
			}
		}
		if i < 3 { // sound ones too: the pools rarely make one
			h = map[string]string{"rate": numbers[2+i], "interval": "9223372036854", "type": strconv.Itoa(i % 2)}
		}
		require.NoError(t, rdb.Del(ctx, keys.Config).Err())
		if len(h) > 0 {
			require.NoError(t, rdb.HSet(ctx, keys.Config, h).Err())
		}
		got, err := wire.ParseConfig(h)
		res, serr := probe.Run(ctx, rdb, keys.All()).Int64Slice()
		switch {
		case serr == nil:
			require.NoError(t, err, "%q: the script accepts it", h)
			want := wire.Config{Rate: res[0], Interval: time.Duration(res[1]) * time.Millisecond,
				KeepAlive: time.Duration(res[2]) * time.Millisecond, Type: int(res[3])}
			require.Equal(t, want, got, "%q", h)
		case strings.HasPrefix(serr.Error(), "RLNOTINIT "):
			require.ErrorIs(t, err, wire.ErrConfigMissing, "%q: %v", h, serr)
			require.NotErrorIs(t, err, wire.ErrConfigCorrupt, "%q", h)
		case strings.HasPrefix(serr.Error(), "RLSTATE "):
			require.ErrorIs(t, err, wire.ErrConfigCorrupt, "%q: %v", h, serr)
			require.NotErrorIs(t, err, wire.ErrConfigMissing, "%q", h)
		default:
			t.Fatalf("%q: the script failed: %v", h, serr)
		}
	}
}

func TestMillis(t *testing.T) {
	for _, tc := range []struct {
		ms   int64
		want time.Duration
	}{
		{0, 0},
		{1, time.Millisecond},
		{-1500, -1500 * time.Millisecond},
		{wire.MaxMS, time.Duration(wire.MaxMS) * time.Millisecond},
		{wire.MaxMS + 1, math.MaxInt64},
		{math.MaxInt64, math.MaxInt64},
		{-wire.MaxMS, -time.Duration(wire.MaxMS) * time.Millisecond},
		{-wire.MaxMS - 1, math.MinInt64},
		{math.MinInt64, math.MinInt64},
	} {
		require.Equal(t, tc.want, wire.Millis(tc.ms), "%d ms", tc.ms)
	}
}

// errors.Is sees a ConfigError through errors.Join and fmt's %w, as the
// root package wraps it.
func TestConfigErrorWrapped(t *testing.T) {
	_, err := wire.ParseConfig(map[string]string{"rate": "1", "interval": "1", "type": "7"})
	wrapped := errors.Join(errors.New("context"), err)
	require.ErrorIs(t, wrapped, wire.ErrConfigCorrupt)
	var ce *wire.ConfigError
	require.ErrorAs(t, wrapped, &ce)
	require.Equal(t, "type", ce.Field)
}
