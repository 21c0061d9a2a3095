package wire_test

import (
	"errors"
	"fmt"

	"github.com/goredisson/ratelimiter/wire"
)

// Decoding a permit record as Redisson 3.21 and later write it: a length
// byte, 16 random bytes, the permits.
func ExampleDecode() {
	rec, _ := wire.Encode(wire.Bc0I, []byte("0123456789abcdef"), 3)
	m, err := wire.Decode(rec)
	fmt.Println(len(rec), m.Format, m.Permits, m.Writer(), err)
	// Output: 21 Bc0I 3 redisson <nil>
}

// The keys of a limiter, as Redisson names them, and their Cluster slot
// (6541: what CLUSTER KEYSLOT api answers).
func ExampleKeysFor() {
	k := wire.KeysFor("api", "client-1")
	fmt.Println(k.Value, k.Permits, k.SameSlot(), wire.Slot(k.Config))
	// Output: {api}:value {api}:permits true 6541
}

// What a limiter of 10 per second has available at 10:00:01.000 when its
// value key says 2 and two records of 4 permits were stamped at 10:00:00.000
// (now out of the window) and 10:00:00.500: the first record's permits
// come back.
func ExampleSettle() {
	const now = 1_000_000 // ms
	value := int64(2)
	recs := []wire.Record{{Score: now - 1000, Permits: 4}, {Score: now - 500, Permits: 4}}
	fmt.Println(wire.Settle(10, &value, recs, now-1000))
	// Output: 6
}

// Reading a limiter's config hash (HGETALL) as the scripts read it: a
// field they refuse is a ConfigError matching ErrConfigCorrupt.
func ExampleParseConfig() {
	cfg, err := wire.ParseConfig(map[string]string{"rate": "10", "interval": "1000", "type": "0"})
	fmt.Println(cfg.Rate, cfg.Interval, cfg.Type, cfg.KeepAlive, err)
	_, err = wire.ParseConfig(map[string]string{"rate": "10", "interval": "1s", "type": "0"})
	fmt.Println(errors.Is(err, wire.ErrConfigCorrupt), err)
	// Output:
	// 10 1s 0 0s <nil>
	// true field interval is "1s", not a decimal integer in [1, 9223372036854]
}
