package main

import (
	"encoding/binary"
	"math"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/goredisson/ratelimiter/wire"
)

// FuzzInspectState: whatever members, scores and value a budget holds,
// decoding the records and working out the available permits never
// panics; the count read is the last four bytes; what an acquisition
// would find never exceeds the rate.
func FuzzInspectState(f *testing.F) {
	f.Add(int64(8), "7", []byte("abc"), 1.5e12, []byte{16, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 1, 0, 0, 0}, 1.7e12)
	f.Add(int64(1), "", []byte{}, math.Inf(-1), []byte{0xff, 0xff, 0xff, 0xff}, math.NaN())
	f.Add(int64(wire.MaxExact), "-9007199254740991", []byte{3, 1, 2, 3, 7, 0, 0, 0}, 0.0, []byte{1}, math.Inf(1))
	f.Fuzz(func(t *testing.T, rate int64, value string, m1 []byte, s1 float64, m2 []byte, s2 float64) {
		if rate < 1 || rate > wire.MaxExact {
			return
		}
		now := time.Now()
		var recs []record
		for _, z := range []redis.Z{{Score: s1, Member: string(m1)}, {Score: s2, Member: string(m2)}} {
			rec := decodeRecord(z, now)
			m := z.Member.(string)
			if len(m) >= 4 && rec.Permits != binary.LittleEndian.Uint32([]byte(m[len(m)-4:])) {
				t.Fatalf("%x: permits %d", m, rec.Permits)
			}
			recs = append(recs, rec)
		}
		var v *int64
		if n, ok := wire.ValueOf(value); ok {
			v = &n
		}
		if a := settled(rate, v, recs, now.UnixMilli()-1000); a > rate {
			t.Fatalf("available %d over the rate %d", a, rate)
		}
	})
}
