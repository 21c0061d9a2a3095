package script

import (
	"encoding/binary"
	"testing"
	"time"
)

// FuzzParseVerdicts: whatever the acquire script's reply holds, parsing it
// never panics, gives one verdict per request or an ErrCorruptState, and
// never a refusal without a positive hint.
func FuzzParseVerdicts(f *testing.F) {
	f.Add(int64(5), []byte{})                                 // a single grant
	f.Add(int64(-3), []byte{})                                // a single refusal
	f.Add(int64(-1), []byte{})                                // a collision, not a reply to parse
	f.Add(int64(10), []byte{1, 0, 0, 0, 0, 0, 0, 0, 3, 0, 0}) // table, odd length
	f.Add(int64(1<<62), make([]byte, 48))
	f.Fuzz(func(t *testing.T, single int64, raw []byte) {
		ns := []int64{1}
		if v, err := parseVerdicts(single, formSingle, ns); err == nil {
			if len(v) != 1 || (!v[0].Res.Granted && v[0].Res.RetryAfter <= 0) {
				t.Fatalf("single %d: %+v", single, v)
			}
		}
		var table []any
		for i := 0; i+8 <= len(raw); i += 8 {
			table = append(table, int64(binary.LittleEndian.Uint64(raw[i:])))
		}
		if len(table) > 3 {
			ns = make([]int64, (len(table)-3+2)/3)
			for i := range ns {
				ns[i] = int64(i + 1)
			}
		}
		v, err := parseVerdicts(table, formTable, ns)
		if err != nil {
			return
		}
		if len(v) != len(ns) {
			t.Fatalf("%d verdicts for %d requests", len(v), len(ns))
		}
		for _, x := range v {
			if x.Err == nil && !x.Res.Granted && x.Res.RetryAfter <= 0 {
				t.Fatalf("refusal without a hint: %+v", x)
			}
			if x.Res.ResetAfter < 0 || x.Res.Interval < 0 || x.Res.Interval > time.Duration(1<<63-1) {
				t.Fatalf("negative duration: %+v", x)
			}
		}
	})
}
