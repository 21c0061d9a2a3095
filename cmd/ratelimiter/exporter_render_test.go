package main

import (
	"bufio"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"

	"github.com/goredisson/ratelimiter"
	"github.com/goredisson/ratelimiter/diag"
)

// pageOf returns what fill writes, in the text format (or OpenMetrics).
func pageOf(t *testing.T, om bool, fill func(e *expo)) string {
	t.Helper()
	var b strings.Builder
	w := bufio.NewWriter(&b)
	fill(&expo{w: w, om: om})
	require.NoError(t, w.Flush())
	return b.String()
}

// One family holds series of different label names (overall and
// PER_CLIENT budgets), label names sorted; label values and help are
// escaped as the format wants, floats written as expfmt writes them, a
// family with no series is left out; expfmt's parser reads the page.
func TestExpoWritesTheFormats(t *testing.T) {
	fill := func(e *expo) {
		e.gauge("a_rate", "Permits per interval.")
		e.sample(10, label{"limiter", `x"y\z` + "\n"})
		e.sample(2.5, label{"limiter", "b"}, label{"client", "c"})
		e.gauge("c_empty", "No series: left out.")
		e.counter("b_total", "Errors.")
		e.sample(math.Inf(1))
	}
	text := pageOf(t, false, fill)
	require.Equal(t, `# HELP a_rate Permits per interval.
# TYPE a_rate gauge
a_rate{limiter="x\"y\\z\n"} 10
a_rate{client="c",limiter="b"} 2.5
# HELP b_total Errors.
# TYPE b_total counter
b_total +Inf
`, text)
	parser := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := parser.TextToMetricFamilies(strings.NewReader(text))
	require.NoError(t, err)
	require.Len(t, fams["a_rate"].GetMetric(), 2)
	require.Equal(t, `x"y\z`+"\n", fams["a_rate"].GetMetric()[0].GetLabel()[0].GetValue())

	require.Equal(t, `# HELP a_rate Permits per interval.
# TYPE a_rate gauge
a_rate{limiter="x\"y\\z\n"} 10.0
a_rate{client="c",limiter="b"} 2.5
# HELP b Errors.
# TYPE b counter
b_total +Inf
`, pageOf(t, true, fill))
}

// Label values are one to one for any byte string: two names that differ
// only in bytes that are not UTF-8, a valid name that reads like the
// quoted form of one of them, and names with CR and ESC make six series,
// none with a control byte.
func TestLabelsUniqueForAnyBytes(t *testing.T) {
	page := pageOf(t, false, func(e *expo) {
		c := &collection{}
		for _, name := range []string{"a\xff", "a\xfe", `"a\xff"`, "a", "a\r", "a\x1b"} {
			c.limiters = append(c.limiters, limiterState{found: found{name: name, cfg: ratelimiter.Config{Rate: 1, Interval: time.Second}}, quoted: needsQuoting(name), ttl: -1})
		}
		writeLimiters(e, c)
	})
	var series []string
	for _, line := range strings.Split(page, "\n") {
		if strings.HasPrefix(line, "ratelimiter_rate{") {
			series = append(series, line)
		}
	}
	require.Len(t, series, 6, "%q", series)
	seen := map[string]bool{}
	for _, s := range series {
		require.False(t, seen[s], s)
		seen[s] = true
		require.True(t, utf8.ValidString(s), s)
		require.Equal(t, shown(s), s, "no control byte")
	}
}

// The exporter says when the server's policy can evict limiter keys.
func TestExporterEvictionRisk(t *testing.T) {
	for _, tc := range []struct {
		ev   diag.Eviction
		risk string
	}{
		{diag.Eviction{Policy: "allkeys-lru", MaxMemory: 1, EvictedKeys: 7}, "2"},
		{diag.Eviction{Policy: "volatile-ttl", MaxMemory: 1}, "1"},
		{diag.Eviction{Policy: "allkeys-lru"}, "0"}, // no maxmemory
		{diag.Eviction{Policy: "noeviction", MaxMemory: 1}, "0"},
	} {
		out := pageOf(t, false, func(e *expo) { writeCollection(e, &collection{eviction: &tc.ev}) })
		require.Contains(t, out, `ratelimiter_redis_eviction_risk{policy="`+tc.ev.Policy+`"} `+tc.risk+"\n")
		require.Contains(t, out, "ratelimiter_redis_evicted_keys_total "+strconv.FormatInt(tc.ev.EvictedKeys, 10)+"\n")
	}
	require.NotContains(t, pageOf(t, false, func(e *expo) { writeCollection(e, &collection{}) }), "eviction_risk", "INFO failed: no figure")
}
