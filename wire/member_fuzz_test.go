package wire_test

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/goredisson/ratelimiter/wire"
)

// FuzzMemberRoundTrip: every record Encode accepts decodes back to
// the same format, random part and permits.
func FuzzMemberRoundTrip(f *testing.F) {
	f.Add(0, bytes.Repeat([]byte{0xab}, 16), uint32(1))
	f.Add(0, []byte{1, 2, 3}, uint32(7)) // would be 8 bytes, the length of an fI record: refused
	f.Add(1, []byte("-9223372036854775808"), uint32(258))
	f.Add(2, []byte{1, 2, 3, 4}, uint32(wire.MaxPermits))
	f.Fuzz(func(t *testing.T, format int, random []byte, permits uint32) {
		mf := wire.Format(format)
		b, err := wire.Encode(mf, random, permits)
		if err != nil {
			return
		}
		m, err := wire.Decode(b)
		if err != nil {
			t.Fatalf("Decode(Encode(%v, %x, %d)): %v", mf, random, permits, err)
		}
		if m.Format != mf || !bytes.Equal(m.Random, random) || m.Permits != permits {
			t.Fatalf("Encode(%v, %x, %d) decodes as %v, %x, %d", mf, random, permits, m.Format, m.Random, m.Permits)
		}
	})
}

// FuzzDecode: arbitrary bytes never panic; what decodes reads its
// permits from the last four bytes, as the scripts do, and encodes back
// to the same bytes.
func FuzzDecode(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{3, 1, 2, 3, 7, 0, 0, 0})
	f.Add(append(binary.LittleEndian.AppendUint64(nil, 1), 9, 1, 0, 0, 0))
	f.Add(bytes.Repeat([]byte{0xff}, 21))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := wire.Decode(b)
		if err != nil {
			return
		}
		if m.Permits != binary.LittleEndian.Uint32(b[len(b)-4:]) {
			t.Fatalf("%x: permits %d are not the last four bytes", b, m.Permits)
		}
		again, err := wire.Encode(m.Format, m.Random, m.Permits)
		if err != nil || !bytes.Equal(again, b) {
			t.Fatalf("%x decodes as %v %x %d, which encodes as %x (%v)", b, m.Format, m.Random, m.Permits, again, err)
		}
	})
}
