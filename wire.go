package ratelimiter

import "github.com/goredisson/ratelimiter/wire"

// MaxPermits is the most permits one call can take or give back: the wire
// format stores the count in 32 bits.
const MaxPermits = wire.MaxPermits
