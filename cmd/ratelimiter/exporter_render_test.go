package main

import (
	"math"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
	"github.com/stretchr/testify/require"

	"github.com/goredisson/ratelimiter"
	"github.com/goredisson/ratelimiter/diag"
)

// pageOf renders what fill sends to a sink as the text format, through
// client_golang's registry and encoder, as a scrape would get it.
func pageOf(t *testing.T, fill func(s *sink)) string {
	t.Helper()
	s := &sink{descs: map[string]*prometheus.Desc{}}
	fill(s)
	reg := prometheus.NewRegistry()
	require.NoError(t, reg.Register(metricsCollector(s.out)))
	fams, err := reg.Gather()
	require.NoError(t, err)
	var b strings.Builder
	enc := expfmt.NewEncoder(&b, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, f := range fams {
		require.NoError(t, enc.Encode(f))
	}
	return b.String()
}

// metricsCollector is an unchecked collector of fixed metrics.
type metricsCollector []prometheus.Metric

func (metricsCollector) Describe(chan<- *prometheus.Desc) {}
func (m metricsCollector) Collect(ch chan<- prometheus.Metric) {
	for _, x := range m {
		ch <- x
	}
}

// One family holds series of different label names (overall and
// PER_CLIENT budgets); label values are escaped as the format wants.
func TestSinkMixedLabels(t *testing.T) {
	out := pageOf(t, func(s *sink) {
		s.gauge("a_rate", "Permits per interval.", 10, label{"limiter", `x"y\z` + "\n"})
		s.gauge("a_rate", "Permits per interval.", 2.5, label{"limiter", "b"}, label{"client", "c"})
		s.add("b_total", prometheus.CounterValue, "Errors.", math.Inf(1))
	})
	require.Equal(t, `# HELP a_rate Permits per interval.
# TYPE a_rate gauge
a_rate{limiter="x\"y\\z\n"} 10
a_rate{client="c",limiter="b"} 2.5
# HELP b_total Errors.
# TYPE b_total counter
b_total +Inf
`, out)
}

// Label values are one to one for any byte string: two names that differ
// only in bytes that are not UTF-8, and a valid name that reads like the
// quoted form of one of them, make three series.
func TestLabelsUniqueForAnyBytes(t *testing.T) {
	page := pageOf(t, func(s *sink) {
		for _, name := range []string{"a\xff", "a\xfe", `"a\xff"`, "a"} {
			renderLimiter(s, limiterState{found: found{name: name, cfg: ratelimiter.Config{Rate: 1, Interval: time.Second}}, ttl: -1}, 0)
		}
	})
	var series []string
	for _, line := range strings.Split(page, "\n") {
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
		ev   diag.Eviction
		risk string
	}{
		{diag.Eviction{Policy: "allkeys-lru", MaxMemory: 1, EvictedKeys: 7}, "2"},
		{diag.Eviction{Policy: "volatile-ttl", MaxMemory: 1}, "1"},
		{diag.Eviction{Policy: "allkeys-lru"}, "0"}, // no maxmemory
		{diag.Eviction{Policy: "noeviction", MaxMemory: 1}, "0"},
	} {
		out := pageOf(t, func(s *sink) { render(s, collection{eviction: &tc.ev}) })
		require.Contains(t, out, `ratelimiter_redis_eviction_risk{policy="`+tc.ev.Policy+`"} `+tc.risk+"\n")
		require.Contains(t, out, "ratelimiter_redis_evicted_keys_total "+strconv.FormatInt(tc.ev.EvictedKeys, 10)+"\n")
	}
	require.NotContains(t, pageOf(t, func(s *sink) { render(s, collection{}) }), "eviction_risk", "INFO failed: no figure")
}
