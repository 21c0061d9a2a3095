package wire_test

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goredisson/ratelimiter/wire"
)

func TestMemberRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		f      wire.Format
		random []byte
		size   int
	}{
		{wire.Bc0I, bytes.Repeat([]byte{0xab}, 16), 21},
		{wire.Bc0I, bytes.Repeat([]byte{0xcd}, 8), 13}, // Redisson 3.17 to 3.20
		{wire.Lc0I, []byte("-9223372036854775808"), 32},
		{wire.Lc0I, bytes.Repeat([]byte{7}, 8), 20}, // raw bytes, as 3.16.4 to 3.16.8 write
		{wire.FI, []byte{1, 2, 3, 4}, 8},
	} {
		for _, permits := range []uint32{0, 1, 258, wire.MaxPermits} {
			b, err := wire.Encode(tc.f, tc.random, permits)
			require.NoError(t, err)
			require.Len(t, b, tc.size)
			m, err := wire.Decode(b)
			require.NoError(t, err)
			require.Equal(t, wire.Member{Format: tc.f, Random: tc.random, Permits: permits}, m)
		}
	}
}

func TestMemberErrors(t *testing.T) {
	for _, tc := range []struct {
		f      wire.Format
		random []byte
	}{
		{wire.Bc0I, nil},
		{wire.Bc0I, make([]byte, 256)},
		{wire.Bc0I, make([]byte, 3)}, // 8 bytes would read as fI
		{wire.Lc0I, nil},
		{wire.FI, make([]byte, 8)},
		{wire.Format(9), make([]byte, 4)},
	} {
		_, err := wire.Encode(tc.f, tc.random, 1)
		require.ErrorIs(t, err, wire.ErrRandom, "%v %d", tc.f, len(tc.random))
	}
	for _, b := range [][]byte{nil, {1, 2, 3, 4, 5}, bytes.Repeat([]byte{0xff}, 21), make([]byte, 30)} {
		_, err := wire.Decode(b)
		require.ErrorIs(t, err, wire.ErrRecord, "%x", b)
	}
	require.Equal(t, "Bc0I", wire.Bc0I.String())
	require.Equal(t, "Lc0I", wire.Lc0I.String())
	require.Equal(t, "fI", wire.FI.String())
	require.Equal(t, "Format(9)", wire.Format(9).String())
}

// OwnMark finds a Client's records, and only its, at the offset it names,
// in every format that has a tag.
func TestOwnMark(t *testing.T) {
	mine, other := wire.Tag{1, 2, 3, 4}, wire.Tag{1, 2, 3, 5}
	for _, f := range []wire.Format{wire.Bc0I, wire.Lc0I} {
		mark, at := wire.OwnMark(f, mine)
		for i := 0; i < 50; i++ {
			m := wire.New(f, mine, uint32(i))
			if got := m[at-1 : at-1+len(mark)]; string(got) != string(mark) {
				t.Fatalf("%v: record %x has %x at %d, want %x", f, m, got, at, mark)
			}
			o := wire.New(f, other, uint32(i))
			if string(o[at-1:at-1+len(mark)]) == string(mark) {
				t.Fatalf("%v: another tag's record %x carries the mark %x", f, o, mark)
			}
		}
	}
	if mark, at := wire.OwnMark(wire.FI, mine); mark != nil || at != 0 {
		t.Errorf("FI: %x at %d, want none", mark, at)
	}
}

// The probe record: one permit, the same bytes for every Client, marked
// as this library's and known as the probe record, in every format. No
// other record reads as it: a Client's own record of one permit, a fill
// record, the probe record with two permits; nor, in FI, any of 100,000
// random records of one permit.
func TestProbeRecord(t *testing.T) {
	for i := range 100000 {
		m, err := wire.Decode(wire.NewSeeded(wire.FI, wire.Tag{}, uint64(i)*0x9e3779b97f4a7c15, 1))
		require.NoError(t, err)
		require.False(t, m.Probe(), "seed %d", i)
	}
	for _, f := range []wire.Format{wire.Bc0I, wire.Lc0I, wire.FI} {
		p := wire.ProbeRecord(f)
		require.Equal(t, p, wire.ProbeRecord(f), "the same bytes every time")
		m, err := wire.Decode(p)
		require.NoError(t, err)
		require.Equal(t, f, m.Format)
		require.Equal(t, uint32(1), m.Permits)
		require.True(t, m.GoMarked())
		require.True(t, m.Probe())
		require.Equal(t, "probe", m.Writer())
		require.True(t, wire.ReadRecord(string(p), 0).Probe)
		for _, other := range [][]byte{
			wire.New(f, wire.Tag{1, 2, 3, 4}, 1),
			wire.NewSeeded(f, wire.FillTag, 0, 1),
			wire.NewSeeded(f, wire.ProbeTag, 0, 2),
		} {
			o, err := wire.Decode(other)
			require.NoError(t, err)
			require.False(t, o.Probe(), "%x", other)
			require.False(t, wire.ReadRecord(string(other), 0).Probe, "%x", other)
		}
	}
}
