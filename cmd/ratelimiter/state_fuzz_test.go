package main

import (
	"encoding/binary"
	"math"
	"math/big"
	"regexp"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

var scriptInteger = regexp.MustCompile(`^-?[0-9]+$`)

// FuzzValueOf: a value key is read as the scripts read it (an optional
// '-', digits, magnitude at most 2^53-1), whatever it holds.
func FuzzValueOf(f *testing.F) {
	for _, s := range []string{"7", "-3", "-0", "007", "2.5", "lots", "", "-", "+1", "9007199254740991", "-9007199254740992", "99999999999999999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, ok := valueOf(s)
		want := false
		if scriptInteger.MatchString(s) {
			b, _ := new(big.Int).SetString(s, 10)
			want = b.CmpAbs(big.NewInt(maxExact)) <= 0
			if want && b.Int64() != v {
				t.Fatalf("%q: %d", s, v)
			}
		}
		if ok != want {
			t.Fatalf("%q: valueOf says %v, the scripts %v", s, ok, want)
		}
	})
}

// FuzzInspectState: whatever members, scores and value a budget holds,
// decoding the records and working out the available permits never
// panics; the count read is the last four bytes; what an acquisition
// would find never exceeds the rate.
func FuzzInspectState(f *testing.F) {
	f.Add(int64(8), "7", []byte("abc"), 1.5e12, []byte{16, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 1, 0, 0, 0}, 1.7e12)
	f.Add(int64(1), "", []byte{}, math.Inf(-1), []byte{0xff, 0xff, 0xff, 0xff}, math.NaN())
	f.Add(int64(maxExact), "-9007199254740991", []byte{3, 1, 2, 3, 7, 0, 0, 0}, 0.0, []byte{1}, math.Inf(1))
	f.Fuzz(func(t *testing.T, rate int64, value string, m1 []byte, s1 float64, m2 []byte, s2 float64) {
		if rate < 1 || rate > maxExact {
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
		if n, ok := valueOf(value); ok {
			v = &n
		}
		if a, err := settled(rate, v, recs, now.UnixMilli()-1000); err == nil && a > rate {
			t.Fatalf("available %d over the rate %d", a, rate)
		}
	})
}
