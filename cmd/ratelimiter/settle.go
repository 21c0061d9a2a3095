package main

import (
	"strconv"
)

// The permits available now, worked out without writing. This mirrors
// settle() in lua/lib.lua and lua/available.lua (what AvailablePermits
// returns), and the records lua/acquire.lua reads before it decides; keep
// them in step (TestInspectCorruptLikeAcquire compares inspect with the
// library on sound and corrupt states).

// The bounds of lua/lib.lua: expired records released per call, records
// read to recount a window, and the largest exact integer.
const (
	expireChunk = 1000
	recountMax  = 10000
	maxExact    = 1<<53 - 1
)

// valueOf parses a value key as the scripts do: a decimal integer (an
// optional '-', then digits) of at most 2^53-1 in magnitude.
func valueOf(s string) (int64, bool) {
	digits := s
	if len(digits) > 0 && digits[0] == '-' {
		digits = digits[1:]
	}
	if digits == "" {
		return 0, false
	}
	for i := 0; i < len(digits); i++ {
		if digits[i] < '0' || digits[i] > '9' {
			return 0, false
		}
	}
	v, err := strconv.ParseInt(s, 10, 64)
	return v, err == nil && v >= -maxExact && v <= maxExact
}

// settled returns what AvailablePermits would return for a budget whose
// value is value (nil: absent) and whose records, in score order, are
// recs; cutoff is now minus the interval, in ms. A record shorter than
// four bytes holds no permits, as in the scripts. It never fails today;
// the error is for the states the scripts refuse.
func settled(rate int64, value *int64, recs []record, cutoff int64) (int64, error) {
	var old, live []record
	for _, r := range recs {
		if r.score <= float64(cutoff) {
			old = append(old, r)
		} else {
			live = append(live, r)
		}
	}
	old = old[:min(len(old), expireChunk)]
	released := permitSum(old)
	v := rate
	if value != nil {
		v = *value
	}
	switch {
	case value == nil || v+released > rate:
		// Recount from the window.
		live = live[:min(len(live), recountMax+1)]
		used := permitSum(live)
		v = rate - used
		if len(live) > recountMax {
			v = 0
		}
	case len(old) > 0:
		v += released
	}
	// Records gone while the value says permits are out: the value stands
	// (lua/lib.lua; the next refused acquisition writes a record of them).
	return max(0, v), nil
}

// permitSum adds the permits of recs; a record too short to hold a count
// holds none (decodeRecord leaves its Permits 0).
func permitSum(recs []record) int64 {
	var total int64
	for _, r := range recs {
		total += int64(r.Permits)
	}
	return total
}
