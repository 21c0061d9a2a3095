package wire

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"
)

// MaxMS is the longest interval or keep-alive, in ms, that a config hash
// may hold: the longest whole-millisecond time.Duration, so that a Config
// read back holds what the scripts use. The scripts refuse a longer one as
// corrupt state (MAXMS in internal/script/lua/lib.lua, acquire.lua, acquire_all.lua;
// TestBoundsMatchLua reads it from them).
const MaxMS = math.MaxInt64 / int64(time.Millisecond)

// Config is a limiter's configuration as its config hash holds it
// (docs/protocol.md): at most Rate permits in any window of Interval.
type Config struct {
	// Type is the field type: 0 for OVERALL (one budget for every
	// client), 1 for PER_CLIENT (a budget per client id).
	Type int
	// Rate is the permits per interval, 1 to MaxExact.
	Rate int64
	// Interval is the window, 1 ms to MaxMS ms, a whole number of ms.
	Interval time.Duration
	// KeepAlive is the TTL that every use renews, 0 (none, or the field
	// absent) to MaxMS ms, a whole number of ms.
	KeepAlive time.Duration
}

// ConfigFields returns the names of a config hash's fields, in the order
// the scripts read them (HMGET): rate, interval, type and keepAliveTime.
func ConfigFields() []string {
	return []string{"rate", "interval", "type", "keepAliveTime"}
}

// ErrConfigMissing matches the ConfigError of a config hash that lacks
// rate, interval or type: the scripts fail with RLNOTINIT (Redisson's
// "RateLimiter is not initialized"; the root package's ErrNotInitialized).
var ErrConfigMissing = errors.New("wire: config hash lacks rate, interval or type")

// ErrConfigCorrupt matches the ConfigError of a field that the scripts
// refuse as corrupt state (RLSTATE; the root package's ErrCorruptState).
var ErrConfigCorrupt = errors.New("wire: config field the scripts refuse")

// ConfigError is why ParseConfig refused a config hash: Field is absent
// (Missing) or holds Value, which the scripts refuse. errors.Is matches
// it to ErrConfigMissing when Missing, else to ErrConfigCorrupt.
type ConfigError struct {
	Field   string // "rate", "interval", "type" or "keepAliveTime"
	Value   string // what the field holds; "" when Missing
	Missing bool
}

// Error returns "no field F", `field F is "V", not a decimal integer in
// [lo, hi]` or `field type is "V", not 0 or 1`.
func (e *ConfigError) Error() string {
	if e.Missing {
		return "no field " + e.Field
	}
	if e.Field == "type" {
		return fmt.Sprintf("field type is %q, not 0 or 1", e.Value)
	}
	lo, hi := fieldRange(e.Field)
	return fmt.Sprintf("field %s is %q, not a decimal integer in [%d, %d]", e.Field, e.Value, lo, hi)
}

// Is reports whether target is ErrConfigMissing (for a missing field) or
// ErrConfigCorrupt (for any other).
func (e *ConfigError) Is(target error) bool {
	if e.Missing {
		return target == ErrConfigMissing
	}
	return target == ErrConfigCorrupt
}

// fieldRange is the range the scripts accept for a numeric field.
func fieldRange(field string) (lo, hi int64) {
	switch field {
	case "rate":
		return 1, MaxExact
	case "interval":
		return 1, MaxMS
	}
	return 0, MaxMS // keepAliveTime
}

// ParseConfig reads a config hash (HGETALL) by the scripts' rule
// (internal/script/lua/lib.lua, limiter()): rate, interval and type present; rate in [1,
// MaxExact], interval in [1, MaxMS], keepAliveTime absent or in [0,
// MaxMS], each a Decimal; type "0" or "1". It returns the Config, or a
// *ConfigError: for the first of rate, interval and type that is absent
// (ErrConfigMissing; an empty hash is one), else for every field the
// scripts refuse (ErrConfigCorrupt, joined with errors.Join). Fields
// other than these four are ignored.
func ParseConfig(h map[string]string) (Config, error) {
	for _, f := range []string{"rate", "interval", "type"} {
		if _, ok := h[f]; !ok {
			return Config{}, &ConfigError{Field: f, Missing: true}
		}
	}
	var errs []error
	field := func(name string) int64 {
		s, ok := h[name]
		if !ok {
			return 0 // keepAliveTime: none
		}
		lo, hi := fieldRange(name)
		if v, ok := Decimal(s); ok && v >= lo && v <= hi {
			return v
		}
		errs = append(errs, &ConfigError{Field: name, Value: s})
		return 0
	}
	c := Config{Rate: field("rate"), Interval: Millis(field("interval")), KeepAlive: Millis(field("keepAliveTime"))}
	switch t := h["type"]; t {
	case "0", "1":
		c.Type = int(t[0] - '0')
	default:
		errs = append(errs, &ConfigError{Field: "type", Value: t})
	}
	if len(errs) > 0 {
		return Config{}, errors.Join(errs...)
	}
	return c, nil
}

// Decimal parses a config field as the scripts do: ASCII digits only (no
// sign, no spaces, leading zeros allowed) of value at most MaxExact. ok
// is false for anything else.
func Decimal(s string) (v int64, ok bool) {
	if s == "" {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	v, err := strconv.ParseInt(s, 10, 64)
	return v, err == nil && v <= MaxExact
}

// Millis returns ms milliseconds as a time.Duration, saturating instead
// of overflowing: beyond about 292 years either side of 0 it returns the
// longest Duration of that sign (math.MaxInt64 or math.MinInt64 ns).
// Every ms in [-MaxMS, MaxMS] converts exactly.
func Millis(ms int64) time.Duration {
	switch {
	case ms > MaxMS:
		return math.MaxInt64
	case ms < -MaxMS:
		return math.MinInt64
	}
	return time.Duration(ms) * time.Millisecond
}
