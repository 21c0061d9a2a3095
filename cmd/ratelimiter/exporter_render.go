package main

import (
	"bufio"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/goredisson/ratelimiter"
	"github.com/goredisson/ratelimiter/diag"
)

// The exporter's own metrics, from one reading: written straight to the
// scrape's response, one family after the other, without building a
// metric object per series (docs/prometheus.md, "Metrics" lists them, and
// "The exporter at scale" says why).

// collection is what one reading of Redis found.
type collection struct {
	limiters  []limiterState
	truncated bool           // a SCAN or limiter bound was hit
	idle      int            // exported limiters with no TTL and no record newer than --idle
	eviction  *diag.Eviction // nil: INFO failed (not allowed, for example)
}

// snapshot is one reading with the exporter's own figures at its end,
// as the scrapes that share it write it.
type snapshot struct {
	c           *collection // nil: the reading failed
	took        time.Duration
	lastSuccess time.Time
	errors      int64 // readings that failed so far
	infoErrors  int64 // readings whose INFO failed so far
	uncounted   int64 // records counted without their permits so far
	// warmup: the reading made at start, which any scrape that waited
	// for it may take.
	warmup bool
	end    time.Time
}

// writeSnapshot writes every ratelimiter_* family of s: the limiters'
// (when the reading succeeded), then the figures of the reading as a
// whole and the exporter's own.
func writeSnapshot(e *expo, s *snapshot) {
	if c := s.c; c != nil {
		writeLimiters(e, c)
		writeCollection(e, c)
	}
	e.gauge("ratelimiter_exporter_collect_seconds", "Duration of this scrape's reading of Redis, successful or not.")
	e.sample(s.took.Seconds())
	e.gauge("ratelimiter_exporter_last_success_timestamp_seconds", "Unix time of the last successful reading.")
	e.sample(float64(s.lastSuccess.UnixMilli()) / 1e3)
	e.counter("ratelimiter_exporter_collect_errors_total", "Readings that failed (Redis unreachable, a timeout, a refused command).")
	e.sample(float64(s.errors))
	e.counter("ratelimiter_exporter_info_errors_total", "Readings whose INFO failed (a user without +info, say): their eviction series are absent.")
	e.sample(float64(s.infoErrors))
	e.counter("ratelimiter_exporter_uncounted_records_total", "Permit records counted in ratelimiter_permit_records_total whose permits ratelimiter_recorded_permits_total left out: a budget had more than --max-records records stamped between two readings.")
	e.sample(float64(s.uncounted))
	e.gauge("ratelimiter_exporter_up", "1 when this scrape's reading of Redis succeeded; 0 when it failed (then no limiter series are sent).")
	e.sample(b2f(s.c != nil))
}

// writeCollection writes the figures of a reading as a whole.
func writeCollection(e *expo, c *collection) {
	if ev := c.eviction; ev != nil {
		risk := 0.0
		switch {
		case ev.Evicts(false):
			risk = 2
		case ev.Evicts(true):
			risk = 1
		}
		e.gauge("ratelimiter_redis_eviction_risk", "2 when the server's maxmemory-policy can evict any limiter's keys, 1 only those of limiters with keep-alive (a TTL), 0 none (docs/differences.md, Eviction).")
		e.sample(risk, label{"policy", ev.Policy})
		e.counter("ratelimiter_redis_evicted_keys_total", "Keys the server has evicted since it started (any keys, INFO evicted_keys).")
		e.sample(float64(ev.EvictedKeys))
	}
	e.gauge("ratelimiter_exporter_limiters", "Limiters found by this scrape's reading.")
	e.sample(float64(len(c.limiters)))
	e.gauge("ratelimiter_idle_limiters", "Limiters of this reading with no TTL and no record newer than --idle: they stay in Redis for good (ratelimiter sweep lists them).")
	e.sample(float64(c.idle))
	e.gauge("ratelimiter_exporter_truncated", "1 when this reading stopped at a bound (--max-limiters, --max-clients, --max-scans): some limiters or clients may be missing.")
	e.sample(b2f(c.truncated))
}

// limiterFamily is one family of per-limiter series, a counter when its
// name ends in _total and a gauge otherwise: each calls emit for every
// series of limiter l (names: l's name labels).
type limiterFamily struct {
	name, help string
	each       func(l *limiterState, names []label, emit func(v float64, labels ...label))
}

// budgetLabels are the labels of budget b of a limiter labelled names.
func budgetLabels(names []label, b *budgetState) []label {
	if b.client == "" {
		return names
	}
	return append(append(make([]label, 0, len(names)+2), names...), quotedLabels("client", b.client, b.clientQuoted)...)
}

// perBudget makes a family's each from one figure of a budget; ok false
// leaves the budget out.
func perBudget(v func(b *budgetState) (float64, bool)) func(*limiterState, []label, func(float64, ...label)) {
	return func(l *limiterState, names []label, emit func(float64, ...label)) {
		for i := range l.budgets {
			b := &l.budgets[i]
			if x, ok := v(b); ok {
				emit(x, budgetLabels(names, b)...)
			}
		}
	}
}

var limiterFamilies = []limiterFamily{
	{"ratelimiter_rate", "Permits per interval (the limiter's rate).",
		func(l *limiterState, names []label, emit func(float64, ...label)) {
			emit(float64(l.cfg.Rate), names...)
		}},
	{"ratelimiter_interval_seconds", "The limiter's window.",
		func(l *limiterState, names []label, emit func(float64, ...label)) {
			emit(l.cfg.Interval.Seconds(), names...)
		}},
	{"ratelimiter_info", "1 for every limiter; mode is overall or per-client.",
		func(l *limiterState, names []label, emit func(float64, ...label)) {
			emit(1, append(names[:len(names):len(names)], label{"mode", l.cfg.Mode.String()})...)
		}},
	{"ratelimiter_ttl_seconds", "Time to live of the limiter's config key; absent when it has none.",
		func(l *limiterState, names []label, emit func(float64, ...label)) {
			if l.ttl >= 0 {
				emit(l.ttl.Seconds(), names...)
			}
		}},
	{"ratelimiter_clients", "PER_CLIENT client ids found (at most --max-clients).",
		func(l *limiterState, names []label, emit func(float64, ...label)) {
			if l.cfg.Mode == ratelimiter.PerClient {
				emit(float64(l.clientsFound), names...)
			}
		}},
	{"ratelimiter_available_permits", "Permits an acquisition would find now (by Redis's clock); absent for a state the scripts refuse.",
		perBudget(func(b *budgetState) (float64, bool) { return float64(b.available), b.hasAvailable })},
	{"ratelimiter_window_permits", "Permits held by records in the window; absent when the window holds more records than --max-records.",
		perBudget(func(b *budgetState) (float64, bool) { return float64(b.windowPermits), b.hasWindow })},
	{"ratelimiter_window_permits_by_writer", "Permits held by records in the window, by writer: go for records this library marks, redisson for the others (Redisson's, or unmarked Go clients'); absent as ratelimiter_window_permits is.",
		func(l *limiterState, names []label, emit func(float64, ...label)) {
			for i := range l.budgets {
				b := &l.budgets[i]
				if !b.hasWindow {
					continue
				}
				labels := budgetLabels(names, b)
				for side, writer := range []string{"go", "redisson"} {
					emit(float64(b.windowSides[side]), append(labels[:len(labels):len(labels)], label{"writer", writer})...)
				}
			}
		}},
	{"ratelimiter_window_records", "Permit records in the window.",
		perBudget(func(b *budgetState) (float64, bool) { return float64(b.windowRecords), true })},
	{"ratelimiter_expired_records", "Records past the interval, not yet released (the next acquisition releases them).",
		perBudget(func(b *budgetState) (float64, bool) { return float64(b.expiredRecords), true })},
	{"ratelimiter_future_records", "Records stamped after Redis's clock: written by a client whose clock is ahead.",
		perBudget(func(b *budgetState) (float64, bool) { return float64(b.futureRecords), true })},
	{"ratelimiter_future_lead_seconds", "How far the newest record is stamped after Redis's clock; 0 when none is.",
		perBudget(func(b *budgetState) (float64, bool) { return b.futureLead.Seconds(), true })},
	{"ratelimiter_permit_records_total", "Permit records counted since this exporter first read the budget, each once, by the reading whose slice of Redis time (from the previous reading's, included, to its own, excluded) holds its stamp: one per call that granted permits (a combined batch or a lease is one call).",
		perBudget(func(b *budgetState) (float64, bool) { return float64(b.records), true })},
	{"ratelimiter_recorded_permits_total", "Permits held by the records ratelimiter_permit_records_total counts, as read; a slice of more than --max-records records adds none (ratelimiter_exporter_uncounted_records_total counts them).",
		perBudget(func(b *budgetState) (float64, bool) { return float64(b.permits), true })},
}

// writeLimiters writes the limiters' series, family by family.
func writeLimiters(e *expo, c *collection) {
	for _, f := range limiterFamilies {
		if strings.HasSuffix(f.name, "_total") {
			e.counter(f.name, f.help)
		} else {
			e.gauge(f.name, f.help)
		}
		for i := range c.limiters {
			l := &c.limiters[i]
			f.each(l, quotedLabels("limiter", l.name, l.quoted), e.sample)
		}
	}
}

// needsQuoting reports whether quotedLabels quotes s: whether it is
// anything but printable UTF-8.
func needsQuoting(s string) bool { return shown(s) != s }

// quotedLabels labels a series with a name that may hold any bytes, one to
// one: a name of printable UTF-8 (spaces included) as it is; anything
// else (bytes that are not UTF-8, control characters such as CR, ESC or
// NUL) Go-quoted, with a second label <key>_quoted="1" so that it cannot
// meet a printable name that reads like the quoted form. Label values
// then never carry a control byte (docs/prometheus.md, "Metrics"). quoted
// is needsQuoting(s), which the reading computes once per name rather than
// once per series written.
func quotedLabels(key, s string, quoted bool) []label {
	if !quoted {
		return []label{{key, s}}
	}
	return []label{{key, strconv.Quote(s)}, {key + "_quoted", "1"}}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// label is one label pair of a series.
type label struct{ name, value string }

// expo writes families of series in the Prometheus text format 0.0.4 or
// OpenMetrics 1.0, as client_golang's expfmt encoders do: HELP, then
// TYPE, then the series, label names sorted, label values and help
// escaped by the format's rules. A family's header is written with its
// first series, so that a family with none is left out. Writes go to a
// bufio.Writer, whose error the caller reads at the end.
type expo struct {
	w  *bufio.Writer
	om bool // OpenMetrics: floats with a point, counters' families without _total

	name    string // the family being written
	pending string // its header, until its first series
}

// gauge begins a gauge family.
func (e *expo) gauge(name, help string) { e.begin(name, "gauge", help) }

// counter begins a counter family; name ends in _total.
func (e *expo) counter(name, help string) { e.begin(name, "counter", help) }

func (e *expo) begin(name, typ, help string) {
	family := name
	if e.om && typ == "counter" {
		family = strings.TrimSuffix(name, "_total")
	}
	helpEscaper := textHelpEscaper
	if e.om {
		helpEscaper = valueEscaper
	}
	e.name = name
	e.pending = "# HELP " + family + " " + helpEscaper.Replace(help) + "\n# TYPE " + family + " " + typ + "\n"
}

// sample writes one series of the family begun last.
func (e *expo) sample(v float64, labels ...label) {
	if e.pending != "" {
		_, _ = e.w.WriteString(e.pending)
		e.pending = ""
	}
	_, _ = e.w.WriteString(e.name)
	if len(labels) > 0 {
		var buf [8]label
		sorted := append(buf[:0], labels...)
		for i := 1; i < len(sorted); i++ {
			for j := i; j > 0 && sorted[j].name < sorted[j-1].name; j-- {
				sorted[j], sorted[j-1] = sorted[j-1], sorted[j]
			}
		}
		_ = e.w.WriteByte('{')
		for i, l := range sorted {
			if i > 0 {
				_ = e.w.WriteByte(',')
			}
			_, _ = e.w.WriteString(l.name)
			_, _ = e.w.WriteString(`="`)
			if needsEscape(l.value) {
				_, _ = valueEscaper.WriteString(e.w, l.value)
			} else {
				_, _ = e.w.WriteString(l.value)
			}
			_ = e.w.WriteByte('"')
		}
		_ = e.w.WriteByte('}')
	}
	_ = e.w.WriteByte(' ')
	_, _ = e.w.WriteString(formatFloat(v, e.om))
	_ = e.w.WriteByte('\n')
}

// needsEscape reports whether a label value holds a byte the formats
// escape: a backslash, a double quote or a newline.
func needsEscape(s string) bool {
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\', '"', '\n':
			return true
		}
	}
	return false
}

var (
	textHelpEscaper = strings.NewReplacer(`\`, `\\`, "\n", `\n`)
	valueEscaper    = strings.NewReplacer(`\`, `\\`, "\n", `\n`, `"`, `\"`)
)

// formatFloat writes v as expfmt does: the shortest form that reads back
// as v, +Inf, -Inf and NaN; in OpenMetrics with ".0" after an integer.
func formatFloat(v float64, om bool) string {
	switch {
	case math.IsNaN(v):
		return "NaN"
	case math.IsInf(v, 1):
		return "+Inf"
	case math.IsInf(v, -1):
		return "-Inf"
	}
	s := strconv.FormatFloat(v, 'g', -1, 64)
	if om && !strings.ContainsAny(s, "e.") {
		s += ".0"
	}
	return s
}
