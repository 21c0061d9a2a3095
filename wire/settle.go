package wire

import (
	"encoding/binary"
	"strings"
	"time"
)

// The bounds of internal/script/lua/lib.lua (EXPIRE_CHUNK, RECOUNT_MAX, MAX): expired
// records released per call, records read to recount a window, and the
// largest exact integer a value may hold. TestBoundsMatchLua reads them
// from the script.
const (
	ExpireChunk = 1000
	RecountMax  = 10000
	MaxExact    = 1<<53 - 1
)

// ProbeHold is how long after the probe record expires (ProbeRecord) this
// library's scripts still leave it in place, its permit out: Redisson's
// longest retry tick (100 ms) and 10 ms. Redisson's scripts give its
// permit back as soon as it expires. The scripts' PROBE_HOLD
// (internal/script/lua/lib.lua), in ms; TestBoundsMatchLua reads it.
const ProbeHold = 110 * time.Millisecond

// Record is what the settle rules read of one permit record: its stamp
// (the sorted-set score, Unix ms), its permits, and whether it is the
// probe record.
type Record struct {
	Score   float64
	Permits uint32
	Probe   bool
}

// ReadRecord returns the Record of a sorted-set member as the scripts read
// it: the permits are the last four bytes, little-endian, whatever the
// format, and a member shorter than four bytes holds none. Probe is
// whether its bytes are ProbeRecord's in some format.
func ReadRecord(member string, score float64) Record {
	r := Record{Score: score}
	if len(member) >= 4 {
		r.Permits = binary.LittleEndian.Uint32([]byte(member[len(member)-4:]))
	}
	r.Probe = member == probeBc0I || member == probeLc0I || member == probeFI
	return r
}

var (
	probeBc0I = string(ProbeRecord(Bc0I))
	probeLc0I = string(ProbeRecord(Lc0I))
	probeFI   = string(ProbeRecord(FI))
)

// ValueOf parses a value key as the scripts do: an optional '-', then a
// Decimal, so a decimal integer of at most MaxExact in magnitude. ok is
// false for anything else, which the scripts refuse as corrupt.
func ValueOf(s string) (v int64, ok bool) {
	if digits, neg := strings.CutPrefix(s, "-"); neg {
		v, ok = Decimal(digits)
		return -v, ok
	}
	return Decimal(s)
}

// Settle returns the permits available now, worked out without writing,
// as internal/script/lua/lib.lua's settle() finds them (what AvailablePermits returns,
// and what an acquisition starts from): rate is the limiter's, value its
// value key (nil: absent), recs its records in score order and cutoff now
// minus the interval, in ms. Records at or before cutoff have left the
// window and give their permits back, at most ExpireChunk of them per
// call; a missing value, or one that the released permits would lift
// over the rate, is recounted from at most RecountMax records in the
// window. The probe record stays out until ProbeHold past its expiry: in
// that time it is read with the expired records and gives nothing back.
// It is never negative.
func Settle(rate int64, value *int64, recs []Record, cutoff int64) int64 {
	var old, live []Record
	for _, r := range recs {
		if r.Score <= float64(cutoff) {
			old = append(old, r)
		} else {
			live = append(live, r)
		}
	}
	old = old[:min(len(old), ExpireChunk)]
	released := sum(old)
	for _, r := range old {
		if r.Probe && r.Score > float64(cutoff-ProbeHold.Milliseconds()) {
			released -= int64(r.Permits)
		}
	}
	v := rate
	if value != nil {
		v = *value
	}
	switch {
	case value == nil || v+released > rate:
		live = live[:min(len(live), RecountMax+1)]
		v = rate - sum(live)
		if len(live) > RecountMax {
			v = 0
		}
	case len(old) > 0:
		v += released
	}
	// Records gone while the value says permits are out: the value stands
	// (internal/script/lua/lib.lua; the next refused acquisition writes a record of them).
	return max(0, v)
}

func sum(recs []Record) int64 {
	var total int64
	for _, r := range recs {
		total += int64(r.Permits)
	}
	return total
}
