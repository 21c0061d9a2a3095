package wire

import (
	"encoding/binary"
	"strings"
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

// Record is what the settle rules read of one permit record: its stamp
// (the sorted-set score, Unix ms) and its permits.
type Record struct {
	Score   float64
	Permits uint32
}

// ReadRecord returns the Record of a sorted-set member as the scripts read
// it: the permits are the last four bytes, little-endian, whatever the
// format, and a member shorter than four bytes holds none.
func ReadRecord(member string, score float64) Record {
	r := Record{Score: score}
	if len(member) >= 4 {
		r.Permits = binary.LittleEndian.Uint32([]byte(member[len(member)-4:]))
	}
	return r
}

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
// window. It is never negative.
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
