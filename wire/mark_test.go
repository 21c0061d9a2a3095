package wire

import (
	"encoding/binary"
	"encoding/hex"
	"math"
	"math/rand/v2"
	"testing"
)

// Every record this library writes carries the mark, in every format, and
// still decodes to its permits.
func TestNewMemberMarked(t *testing.T) {
	for _, f := range []Format{Bc0I, Lc0I, FI} {
		for i := 0; i < 1000; i++ {
			tag := Tag{0xde, 0xad, byte(i), 0x0f}
			b := New(f, tag, 7)
			m, err := Decode(b)
			if err != nil || m.Format != f || m.Permits != 7 {
				t.Fatalf("%v: %x decodes to %+v, %v", f, b, m, err)
			}
			if !goMarked(b) {
				t.Fatalf("%v: record %x not marked", f, b)
			}
			got, ok := m.GoTag()
			if want := hex.EncodeToString(tag[:]); f != FI && (!ok || got != want) {
				t.Fatalf("%v: record %x has tag %q, %v; want %q", f, b, got, ok, want)
			}
			if f == FI && ok {
				t.Fatalf("fI record %x has a tag %q", b, got)
			}
			if f == FI {
				x := math.Float32frombits(binary.LittleEndian.Uint32(m.Random))
				if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
					t.Fatalf("fI random part %v is not finite", x)
				}
			}
		}
	}
}

// Records made as Redisson makes them are not marked: random bytes (Bc0I,
// Lc0I) and the float32 of a random int64 (fI).
func TestRedissonMembersUnmarked(t *testing.T) {
	for i := 0; i < 10000; i++ {
		var r [16]byte
		binary.LittleEndian.PutUint64(r[:], rand.Uint64())
		binary.LittleEndian.PutUint64(r[8:], rand.Uint64())
		for _, f := range []Format{Bc0I, Lc0I} {
			b, _ := Encode(f, r[:8+i%9], 1)
			if goMarked(b) {
				t.Fatalf("%v record %x read as marked", f, b)
			}
		}
		// Redisson 3.16.3: (float) of a random long, extremes included.
		x := float32(int64(rand.Uint64()))
		if i == 0 {
			x = float32(math.MinInt64)
		}
		var fb [4]byte
		binary.LittleEndian.PutUint32(fb[:], math.Float32bits(x))
		b, _ := Encode(FI, fb[:], 1)
		if goMarked(b) {
			t.Fatalf("fI record of %v read as marked", x)
		}
	}
	if goMarked([]byte{1, 2}) {
		t.Error("a 2-byte record read as marked")
	}
}

// goMarked reports whether record b was written by this library (any
// version that marks its records), from its random part.
func goMarked(b []byte) bool {
	m, err := Decode(b)
	return err == nil && m.GoMarked()
}
