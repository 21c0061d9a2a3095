package wire

import (
	"math"
	"strconv"
)

// Format is the byte layout of the permit records (sorted-set members)
// that a client writes. This library reads the permit count from the last
// four bytes, which works for every generation, but Redisson unpacks a
// record with its own format from the first byte: an older Redisson takes
// the wrong bytes of a newer record as the count. Write the format of the
// oldest Redisson in the fleet that shares the limiter.
type Format int

const (
	// Bc0I is the layout of Redisson 3.21.0 and later, and the default
	// (Lua struct "Bc0I"): one byte 16, 16 random bytes, the permits as
	// uint32 little-endian; 21 bytes. It is also the format to write next
	// to Redisson 3.17.0 to 3.20.x, which write the same layout with 8
	// random bytes and read 16-byte ones correctly.
	Bc0I Format = iota
	// Lc0I is Redisson 3.16.4 to 3.16.8: the length of the random part as
	// uint64 little-endian, the random part, the permits as uint32
	// little-endian. Those versions write 8 raw random bytes; this library
	// writes the decimal text of a random signed 64-bit integer, as the
	// first written spec described, which they read the same way
	// (docs/protocol.md). Use it next to them: their scripts fail ("data
	// string too short") on a 21-byte Bc0I record once it leaves the
	// window, and Redisson 3.17 and later misread Lc0I records as huge
	// permit counts.
	Lc0I
	// FI is Redisson 3.16.3 and earlier: a float32 little-endian, then the
	// permits as uint32 little-endian; 8 bytes.
	FI
)

// MaxPermits is the most permits one record holds: the count is 32 bits.
const MaxPermits = math.MaxUint32

// String returns the Lua struct format name of f ("Bc0I", "Lc0I", "fI"),
// or "Format(n)" for a value that is none of them.
func (f Format) String() string {
	switch f {
	case Bc0I:
		return "Bc0I"
	case Lc0I:
		return "Lc0I"
	case FI:
		return "fI"
	}
	return "Format(" + strconv.Itoa(int(f)) + ")"
}

// Valid reports whether f is one of Bc0I, Lc0I and FI.
func (f Format) Valid() bool { return f >= Bc0I && f <= FI }
