package ratelimiter_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goredisson/ratelimiter"
)

func TestMemberRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		f      ratelimiter.MemberFormat
		random []byte
		size   int
	}{
		{ratelimiter.FormatBc0I, bytes.Repeat([]byte{0xab}, 16), 21},
		{ratelimiter.FormatBc0I, bytes.Repeat([]byte{0xcd}, 8), 13}, // Redisson 3.17 to 3.20
		{ratelimiter.FormatLc0I, []byte("-9223372036854775808"), 32},
		{ratelimiter.FormatLc0I, bytes.Repeat([]byte{7}, 8), 20}, // raw bytes, as 3.16.4 to 3.16.8 write
		{ratelimiter.FormatFI, []byte{1, 2, 3, 4}, 8},
	} {
		for _, permits := range []uint32{0, 1, 258, ratelimiter.MaxPermits} {
			b, err := ratelimiter.EncodeMember(tc.f, tc.random, permits)
			require.NoError(t, err)
			require.Len(t, b, tc.size)
			m, err := ratelimiter.DecodeMember(b)
			require.NoError(t, err)
			require.Equal(t, ratelimiter.Member{Format: tc.f, Random: tc.random, Permits: permits}, m)
		}
	}
}

func TestMemberErrors(t *testing.T) {
	for _, tc := range []struct {
		f      ratelimiter.MemberFormat
		random []byte
	}{
		{ratelimiter.FormatBc0I, nil},
		{ratelimiter.FormatBc0I, make([]byte, 256)},
		{ratelimiter.FormatBc0I, make([]byte, 3)}, // 8 bytes would read as fI
		{ratelimiter.FormatLc0I, nil},
		{ratelimiter.FormatFI, make([]byte, 8)},
		{ratelimiter.MemberFormat(9), make([]byte, 4)},
	} {
		_, err := ratelimiter.EncodeMember(tc.f, tc.random, 1)
		require.ErrorIs(t, err, ratelimiter.ErrInvalidArgument, "%v %d", tc.f, len(tc.random))
	}
	for _, b := range [][]byte{nil, {1, 2, 3, 4, 5}, bytes.Repeat([]byte{0xff}, 21), make([]byte, 30)} {
		_, err := ratelimiter.DecodeMember(b)
		require.ErrorIs(t, err, ratelimiter.ErrCorruptState, "%x", b)
	}
	require.Equal(t, "Bc0I", ratelimiter.FormatBc0I.String())
	require.Equal(t, "Lc0I", ratelimiter.FormatLc0I.String())
	require.Equal(t, "fI", ratelimiter.FormatFI.String())
	require.Equal(t, "MemberFormat(9)", ratelimiter.MemberFormat(9).String())
}

// TestAcquireRecountsOverRateValue: a Redisson availablePermits stores an
// uncapped sum after release and expiry (2 x rate here); our acquisition
// recounts instead of granting it.
func TestAcquireRecountsOverRateValue(t *testing.T) {
	ctx := context.Background()
	l, rdb, _ := setup(t, ratelimiter.Config{Rate: 5, Interval: time.Minute})
	ok, err := l.TryAcquire(ctx, 2)
	require.NoError(t, err)
	require.True(t, ok)
	require.NoError(t, rdb.Set(ctx, l.Keys().Value, 10, 0).Err())

	ok, err = l.TryAcquire(ctx, 4)
	require.NoError(t, err)
	require.False(t, ok, "only 5 - 2 = 3 are left in the window")
	require.Equal(t, "3", rdb.Get(ctx, l.Keys().Value).Val())

	require.NoError(t, rdb.Set(ctx, l.Keys().Value, 10, 0).Err())
	n, err := l.AvailablePermits(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(3), n)
}
