package main

import (
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/goredisson/ratelimiter"
	"github.com/goredisson/ratelimiter/diag"
)

// The exporter's metrics, from one collection. docs/prometheus.md ("Metrics")
// lists them.

// collection is what one pass over Redis found.
type collection struct {
	limiters  []limiterState
	truncated bool           // a SCAN or limiter bound was hit
	elapsed   time.Duration  // since the previous successful collection, by Redis's clock; 0 on the first
	idle      int            // exported limiters with no TTL and no record newer than --idle
	eviction  *diag.Eviction // nil: INFO failed (not allowed, for example)
}

// render sends a collection's series to s: each limiter's, then the
// figures of the collection as a whole. The exporter's own state (up,
// errors) is the caller's.
func render(s *sink, c collection) {
	for _, l := range c.limiters {
		renderLimiter(s, l, c.elapsed)
	}
	if ev := c.eviction; ev != nil {
		risk := 0.0
		switch {
		case ev.Evicts(false):
			risk = 2
		case ev.Evicts(true):
			risk = 1
		}
		s.gauge("ratelimiter_redis_eviction_risk", "2 when the server's maxmemory-policy can evict any limiter's keys, 1 only those of limiters with keep-alive (a TTL), 0 none (docs/differences.md, Eviction).", risk, label{"policy", ev.Policy})
		s.add("ratelimiter_redis_evicted_keys_total", prometheus.CounterValue, "Keys the server has evicted since it started (any keys, INFO evicted_keys).", float64(ev.EvictedKeys))
	}
	s.gauge("ratelimiter_exporter_limiters", "Limiters found by this scrape's reading.", float64(len(c.limiters)))
	s.gauge("ratelimiter_idle_limiters", "Limiters of this reading with no TTL and no record newer than --idle: they stay in Redis for good (ratelimiter sweep lists them).", float64(c.idle))
	s.gauge("ratelimiter_exporter_truncated", "1 when this reading stopped at a bound (--max-limiters, --max-clients, --max-scans): some limiters or clients may be missing.", b2f(c.truncated))
}

// nameLabels labels a series with a name that may hold any bytes, one to
// one: valid UTF-8 as it is; anything else Go-quoted, with a second label
// <key>_quoted="1" so that it cannot meet a valid name that reads like
// the quoted form. (The format wants UTF-8: replacing the bad bytes by
// U+FFFD made two names one series.)
func nameLabels(key, s string) []label {
	if utf8.ValidString(s) {
		return []label{{key, s}}
	}
	return []label{{key, strconv.Quote(s)}, {key + "_quoted", "1"}}
}

func renderLimiter(e *sink, l limiterState, elapsed time.Duration) {
	names := nameLabels("limiter", l.name)
	e.gauge("ratelimiter_rate", "Permits per interval (the limiter's rate).", float64(l.cfg.Rate), names...)
	e.gauge("ratelimiter_interval_seconds", "The limiter's window.", l.cfg.Interval.Seconds(), names...)
	e.gauge("ratelimiter_info", "1 for every limiter; mode is overall or per-client.", 1, append(names, label{"mode", l.cfg.Mode.String()})...)
	if l.ttl >= 0 {
		e.gauge("ratelimiter_ttl_seconds", "Time to live of the limiter's config key; absent when it has none.", l.ttl.Seconds(), names...)
	}
	if l.cfg.Mode == ratelimiter.PerClient {
		e.gauge("ratelimiter_clients", "PER_CLIENT client ids found (at most --max-clients).", float64(l.clientsFound), names...)
	}
	for _, b := range l.budgets {
		labels := names
		if b.client != "" {
			labels = append(append([]label(nil), names...), nameLabels("client", b.client)...)
		}
		if b.available != nil {
			e.gauge("ratelimiter_available_permits", "Permits an acquisition would find now (by Redis's clock); absent for a state the scripts refuse.", float64(*b.available), labels...)
		}
		if b.windowPermits != nil {
			e.gauge("ratelimiter_window_permits", "Permits held by records in the window; absent when the window holds more records than --max-records.", float64(*b.windowPermits), labels...)
			for i, side := range []string{"go", "redisson"} {
				e.gauge("ratelimiter_window_permits_by_writer", "Permits held by records in the window, by writer: go for records this library marks, redisson for the others (Redisson's, or unmarked Go clients'); absent as ratelimiter_window_permits is.", float64(b.windowSides[i]), append(append([]label(nil), labels...), label{"writer", side})...)
			}
		}
		e.gauge("ratelimiter_window_records", "Permit records in the window.", float64(b.windowRecords), labels...)
		e.gauge("ratelimiter_expired_records", "Records past the interval, not yet released (the next acquisition releases them).", float64(b.expiredRecords), labels...)
		e.gauge("ratelimiter_future_records", "Records stamped after Redis's clock: written by a client whose clock is ahead.", float64(b.futureRecords), labels...)
		e.gauge("ratelimiter_future_lead_seconds", "How far the newest record is stamped after Redis's clock; 0 when none is.", b.futureLead.Seconds(), labels...)
		if b.since != nil && elapsed > 0 {
			e.gauge("ratelimiter_grants_per_second", "Permits in records stamped since the previous scrape's reading (by any scraper), per second of Redis time.", float64(*b.since)/elapsed.Seconds(), labels...)
		}
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// label is one label pair of a series.
type label struct{ name, value string }

// sink collects the series of one reading as prometheus.Metrics. Series
// of one family may carry different label names (a PER_CLIENT budget's
// client, a quoted name's _quoted label), which the text and OpenMetrics
// formats allow; each (name, label names) pair gets one Desc, kept in
// descs across readings.
type sink struct {
	descs map[string]*prometheus.Desc
	out   []prometheus.Metric
}

// add appends a series of family name with the given type, help and
// value. Every series of one name must be given the same help and type
// (the registry refuses a family that mixes them). A series the client
// library refuses (a label value that is not UTF-8, which nameLabels
// rules out) is added as an invalid metric, which the scrape reports
// instead of panicking.
func (s *sink) add(name string, typ prometheus.ValueType, help string, value float64, labels ...label) {
	names := make([]string, len(labels))
	values := make([]string, len(labels))
	for i, l := range labels {
		names[i], values[i] = l.name, l.value
	}
	key := name + "\x00" + strings.Join(names, "\x00")
	d := s.descs[key]
	if d == nil {
		d = prometheus.NewDesc(name, help, names, nil)
		s.descs[key] = d
	}
	m, err := prometheus.NewConstMetric(d, typ, value, values...)
	if err != nil {
		m = prometheus.NewInvalidMetric(d, err)
	}
	s.out = append(s.out, m)
}

// gauge is add for a gauge.
func (s *sink) gauge(name, help string, value float64, labels ...label) {
	s.add(name, prometheus.GaugeValue, help, value, labels...)
}
