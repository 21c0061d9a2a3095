package wire_test

import (
	"testing"

	"github.com/goredisson/ratelimiter/wire"
)

// TestKeysForNamesAsRedisson checks the keys against Redisson's naming,
// spelled out, for names with and without a hash tag of their own, and
// that they take one allocation (they are substrings of one string).
func TestKeysForNamesAsRedisson(t *testing.T) {
	for _, tc := range []struct{ name, id, tag string }{
		{"api", "c1", "{api}"},
		{"user:42", "0f3c", "{user:42}"},
		{"{tenant}:7", "c1", "{tenant}:7"},
		{"x", "", "{x}"},
	} {
		got := wire.KeysFor(tc.name, tc.id)
		want := wire.Keys{
			Config:        tc.name,
			Value:         tc.tag + ":value",
			ClientValue:   tc.tag + ":value:" + tc.id,
			Permits:       tc.tag + ":permits",
			ClientPermits: tc.tag + ":permits:" + tc.id,
		}
		if got != want {
			t.Errorf("KeysFor(%q, %q) = %+v, want %+v", tc.name, tc.id, got, want)
		}
	}
	if n := testing.AllocsPerRun(100, func() { _ = wire.KeysFor("user:42", "0f3c") }); n > 1 {
		t.Errorf("KeysFor made %v allocations, want 1", n)
	}
}
