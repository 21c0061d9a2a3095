package ratelimiter

import (
	"math/big"
	"regexp"
	"testing"
	"time"

	"github.com/goredisson/ratelimiter/wire"
)

var digitsOnly = regexp.MustCompile(`^[0-9]+$`)

// wantField is the scripts' rule, written independently of decimal: digits
// only, value in [lo, hi].
func wantField(s string, lo, hi int64) (int64, bool) {
	if !digitsOnly.MatchString(s) {
		return 0, false
	}
	v, _ := new(big.Int).SetString(s, 10)
	if v.Cmp(big.NewInt(lo)) < 0 || v.Cmp(big.NewInt(hi)) > 0 {
		return 0, false
	}
	return v.Int64(), true
}

// FuzzParseConfig: whatever a config hash holds, parseConfig never
// panics, accepts exactly what the scripts accept, and returns the fields
// it accepted.
func FuzzParseConfig(f *testing.F) {
	f.Add("10", "1000", "0", "0", true)
	f.Add("0x10", "1000", "1", "", false)
	f.Add("9007199254740992", "1", "0", "", false)
	f.Add("1", "9007199254740991", "1", "9007199254740991", true)
	f.Add("1", "9223372036854", "1", "9223372036855", true)
	f.Add("+1", "-1", "00", " 5", true)
	f.Fuzz(func(t *testing.T, rate, interval, typ, keep string, hasKeep bool) {
		h := map[string]string{"rate": rate, "interval": interval, "type": typ}
		if hasKeep {
			h["keepAliveTime"] = keep
		} else {
			keep = "0"
		}
		cfg, err := parseConfig(h, "k")
		r, ok1 := wantField(rate, 1, maxRate)
		i, ok2 := wantField(interval, 1, 9223372036854) // the longest Duration, in ms
		k, ok3 := wantField(keep, 0, 9223372036854)
		ok := ok1 && ok2 && ok3 && (typ == "0" || typ == "1")
		if ok != (err == nil) {
			t.Fatalf("%q: parseConfig says %v, the scripts' rule %v", h, err, ok)
		}
		if !ok {
			return
		}
		if cfg.Rate != r || cfg.Interval != time.Duration(i)*time.Millisecond || cfg.KeepAlive != time.Duration(k)*time.Millisecond || int(cfg.Mode) != int(typ[0]-'0') {
			t.Fatalf("%q: got %+v", h, cfg)
		}
		if cfg.Interval < time.Millisecond || cfg.Interval%time.Millisecond != 0 || cfg.KeepAlive < 0 {
			t.Fatalf("%q: durations %v %v", h, cfg.Interval, cfg.KeepAlive)
		}
	})
}

// FuzzTTLDuration: a PTTL reply becomes TTLPersistent, TTLMissing or a
// non-negative Duration that grows with the reply and never wraps.
func FuzzTTLDuration(f *testing.F) {
	for _, ms := range []int64{-2, -1, 0, 1, 9223372036854, 9223372036855, 1<<63 - 1, -1 << 63} {
		f.Add(ms)
	}
	f.Fuzz(func(t *testing.T, ms int64) {
		d := ttlDuration(ms)
		switch {
		case ms == -1:
			if d != TTLPersistent {
				t.Fatalf("%d: %v", ms, d)
			}
		case ms < 0:
			if d != TTLMissing {
				t.Fatalf("%d: %v", ms, d)
			}
		case d < 0 || (ms < 1<<62 && ttlDuration(ms+1) < d):
			t.Fatalf("%d: %v", ms, d)
		case ms <= wire.MaxMS && d != time.Duration(ms)*time.Millisecond:
			t.Fatalf("%d: %v", ms, d)
		}
	})
}
