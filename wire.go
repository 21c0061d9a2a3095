package ratelimiter

import "github.com/goredisson/ratelimiter/wire"

// MemberFormat is the byte layout of the permit records (sorted-set
// members) that a client writes (wire.Format). This library reads the
// permit count from the last four bytes, which works for every
// generation, but Redisson unpacks a record with its own format from the
// first byte: an older Redisson takes the wrong bytes of a newer record as
// the count. Write the format of the oldest Redisson in the fleet that
// shares the limiter (WithMemberFormat).
type MemberFormat = wire.Format

const (
	// FormatBc0I is the layout of Redisson 3.17.0 and later, and the
	// default: 21 bytes (wire.Bc0I).
	FormatBc0I = wire.Bc0I
	// FormatLc0I is the layout of Redisson 3.16.4 to 3.16.8 (wire.Lc0I).
	FormatLc0I = wire.Lc0I
	// FormatFI is the layout of Redisson 3.16.3 and earlier (wire.FI).
	FormatFI = wire.FI
)

// MaxPermits is the most permits one call can take or give back: the wire
// format stores the count in 32 bits.
const MaxPermits = wire.MaxPermits

// Keys are the Redis keys of one limiter as seen by one client, named as
// Redisson names them (docs/protocol.md, section 1; wire.Keys).
type Keys = wire.Keys
