package main

import (
	"math"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/goredisson/ratelimiter"
)

// The text format: families grouped with HELP and TYPE, label values
// escaped, special floats spelled as the format wants.
func TestExpositionText(t *testing.T) {
	e := newExposition()
	e.gauge("a_rate", "Permits per interval.\nSecond \\ line.", 10, label{"limiter", `x"y\z` + "\n"})
	e.add("b_total", "counter", "Errors.", math.Inf(1))
	e.gauge("a_rate", "ignored", 2.5, label{"limiter", "\xff"}, label{"client", "c"})
	e.gauge("c", "NaN", math.NaN())
	require.Equal(t, `# HELP a_rate Permits per interval.\nSecond \\ line.
# TYPE a_rate gauge
a_rate{limiter="x\"y\\z\n"} 10
a_rate{limiter="`+"\uFFFD"+`",client="c"} 2.5
# HELP b_total Errors.
# TYPE b_total counter
b_total +Inf
# HELP c NaN
# TYPE c gauge
c NaN
`, string(e.bytes()))
}

// Label values are one to one for any byte string: two names that differ
// only in bytes that are not UTF-8, and a valid name that reads like the
// quoted form of one of them, make three series.
func TestLabelsUniqueForAnyBytes(t *testing.T) {
	e := newExposition()
	for _, name := range []string{"a\xff", "a\xfe", `"a\xff"`, "a"} {
		renderLimiter(e, limiterState{found: found{name: name, cfg: ratelimiter.Config{Rate: 1, Interval: time.Second}}, ttl: -1}, 0)
	}
	var series []string
	for _, line := range strings.Split(string(e.bytes()), "\n") {
		if strings.HasPrefix(line, "ratelimiter_rate{") {
			series = append(series, line)
		}
	}
	require.Len(t, series, 4, "%q", series)
	seen := map[string]bool{}
	for _, s := range series {
		require.False(t, seen[s], s)
		seen[s] = true
		require.True(t, utf8.ValidString(s), s)
	}
}

// The exporter says when the server's policy can evict limiter keys.
func TestExporterEvictionRisk(t *testing.T) {
	for _, tc := range []struct {
		ev   ratelimiter.Eviction
		risk string
	}{
		{ratelimiter.Eviction{Policy: "allkeys-lru", MaxMemory: 1, EvictedKeys: 7}, "2"},
		{ratelimiter.Eviction{Policy: "volatile-ttl", MaxMemory: 1}, "1"},
		{ratelimiter.Eviction{Policy: "allkeys-lru"}, "0"}, // no maxmemory
		{ratelimiter.Eviction{Policy: "noeviction", MaxMemory: 1}, "0"},
	} {
		out := string(render(collection{eviction: &tc.ev}, &exporterStats{}))
		require.Contains(t, out, `ratelimiter_redis_eviction_risk{policy="`+tc.ev.Policy+`"} `+tc.risk+"\n")
		require.Contains(t, out, "ratelimiter_redis_evicted_keys_total "+strconv.FormatInt(tc.ev.EvictedKeys, 10)+"\n")
	}
	require.NotContains(t, string(render(collection{}, &exporterStats{})), "eviction_risk", "INFO failed: no figure")
}
