package ratelimiter

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
)

// MemberFormat is the byte layout of the permit records (sorted-set
// members) that a client writes. This library reads the permit count from
// the last four bytes, which works for every generation, but Redisson
// unpacks a record with its own format from the first byte: an older
// Redisson takes the wrong bytes of a newer record as the count. Write the
// format of the oldest Redisson in the fleet that shares the limiter.
type MemberFormat int

const (
	// FormatBc0I is the layout of Redisson 3.21.0 and later, and the
	// default (Lua struct "Bc0I"): one byte 16, 16 random bytes, the
	// permits as uint32 little-endian; 21 bytes. It is also the format to
	// write next to Redisson 3.17.0 to 3.20.x, which write the same layout
	// with 8 random bytes and read 16-byte ones correctly.
	FormatBc0I MemberFormat = iota
	// FormatLc0I is Redisson 3.16.4 to 3.16.8: the length of the random
	// part as uint64 little-endian, the random part, the permits as uint32
	// little-endian. Those versions write 8 raw random bytes; this library
	// writes the decimal text of a random signed 64-bit integer, as the
	// first written spec described, which they read the same way
	// (docs/protocol.md). Use it next to them: their scripts fail ("data
	// string too short") on a 21-byte FormatBc0I record once it leaves the
	// window, and Redisson 3.17 and later misread Lc0I records as huge
	// permit counts.
	FormatLc0I
	// FormatFI is Redisson 3.16.3 and earlier: a float32 little-endian,
	// then the permits as uint32 little-endian; 8 bytes.
	FormatFI
)

// MaxPermits is the most permits one call can take or give back: the wire
// format stores the count in 32 bits.
const MaxPermits = math.MaxUint32

// String returns the Lua struct format name of f ("Bc0I", "Lc0I", "fI").
func (f MemberFormat) String() string {
	switch f {
	case FormatBc0I:
		return "Bc0I"
	case FormatLc0I:
		return "Lc0I"
	case FormatFI:
		return "fI"
	}
	return "MemberFormat(" + strconv.Itoa(int(f)) + ")"
}

func (f MemberFormat) valid() bool { return f >= FormatBc0I && f <= FormatFI }

// Member is one decoded permit record.
type Member struct {
	// Format is the layout the record was written in.
	Format MemberFormat
	// Random is the part that keeps records unique: 16 bytes for
	// FormatBc0I (8 from Redisson 3.17 to 3.20), the text or bytes of
	// FormatLc0I, the 4 float bytes for FormatFI.
	Random []byte
	// Permits is the number of permits the acquisition took.
	Permits uint32
}

// EncodeMember builds a permit record. random must be 4 bytes for FormatFI
// and 1 to 255 bytes for the others, except 3 for FormatBc0I (Redisson
// writes 16 for FormatBc0I, 8 before 3.21): a FormatBc0I record with
// 3 random bytes is 8 bytes long and reads as FormatFI. It fails with
// ErrInvalidArgument for another length or an unknown format, so that
// DecodeMember gives back what EncodeMember accepted.
func EncodeMember(f MemberFormat, random []byte, permits uint32) ([]byte, error) {
	var out []byte
	switch f {
	case FormatBc0I:
		if len(random) < 1 || len(random) > 255 {
			return nil, invalid("Bc0I random part must be 1 to 255 bytes, got %d", len(random))
		}
		if len(random) == 3 {
			return nil, invalid("Bc0I random part of 3 bytes makes an 8-byte record, which reads as fI")
		}
		out = append(append(make([]byte, 0, 5+len(random)), byte(len(random))), random...)
	case FormatLc0I:
		if len(random) < 1 || len(random) > 255 {
			return nil, invalid("Lc0I random part must be 1 to 255 bytes, got %d", len(random))
		}
		out = binary.LittleEndian.AppendUint64(make([]byte, 0, 12+len(random)), uint64(len(random)))
		out = append(out, random...)
	case FormatFI:
		if len(random) != 4 {
			return nil, invalid("fI random part must be 4 bytes, got %d", len(random))
		}
		out = append(make([]byte, 0, 8), random...)
	default:
		return nil, invalid("unknown member format %d", int(f))
	}
	return binary.LittleEndian.AppendUint32(out, permits), nil
}

// DecodeMember reads a permit record written by any Redisson generation.
// It recognises the format from the record's shape and fails with
// ErrCorruptState for bytes that fit none of them.
func DecodeMember(b []byte) (Member, error) {
	if len(b) < 6 {
		return Member{}, fmt.Errorf("%w: permit record of %d bytes", ErrCorruptState, len(b))
	}
	permits := binary.LittleEndian.Uint32(b[len(b)-4:])
	switch {
	case len(b) == 8:
		return Member{Format: FormatFI, Random: b[:4], Permits: permits}, nil
	case int(b[0]) == len(b)-5:
		return Member{Format: FormatBc0I, Random: b[1 : len(b)-4], Permits: permits}, nil
	case len(b) >= 13 && binary.LittleEndian.Uint64(b) == uint64(len(b)-12):
		return Member{Format: FormatLc0I, Random: b[8 : len(b)-4], Permits: permits}, nil
	}
	return Member{}, fmt.Errorf("%w: permit record %x fits no known format", ErrCorruptState, b)
}

// newMember makes a fresh record for permits in format f, marked as this
// library's (goMark) and, in FormatBc0I and FormatLc0I, carrying tag, the
// writing Client's RecordTag. The rest of the random part only has to keep
// records unique, so a fast non-cryptographic source does.
func newMember(f MemberFormat, tag [goTagLen]byte, permits uint32) []byte {
	var random []byte
	switch f {
	case FormatLc0I:
		random = hex.AppendEncode([]byte(goMark), tag[:])
		random = strconv.AppendInt(random, int64(rand.Uint64()), 10)
	case FormatFI:
		// Redisson rounds a random int64 to float32: its exponent field is
		// at most 190 (|x| <= 2^63). Ours is 192 to 254: a finite float
		// that reads the same to every Redisson and that Redisson never
		// writes, with about 2^30 distinct values. No room for a tag.
		bits := rand.Uint32()
		exp := goFloatMinExp + bits%(255-goFloatMinExp)
		random = binary.LittleEndian.AppendUint32(nil, bits&0x807fffff|exp<<23)
	default:
		// 16 bytes, as Redisson 3.21 writes: the mark, the tag and 64
		// random bits, as unique within one Client as the 8 random bytes
		// of Redisson 3.17 to 3.20.
		random = append([]byte(goMark), tag[:]...)
		random = binary.LittleEndian.AppendUint64(random, rand.Uint64())
	}
	m, _ := EncodeMember(f, random, permits)
	return m
}

// goTagLen is the length of a Client's record tag in bytes.
const goTagLen = 4

// goMark starts the random part of every Bc0I and Lc0I record this
// library writes. Redisson never reads a record's random part (it unpacks
// the permits only), so the mark is invisible to it, and Redisson's own
// random parts begin with these four bytes once in 2^32 records.
const goMark = "GoRL"

// goFloatMinExp is the lowest float32 exponent field of an fI record this
// library writes; Redisson's are at most 190.
const goFloatMinExp = 192

// GoMarked reports whether the record was written by this library: its
// random part carries the mark this library writes since v0.1.0 (docs/
// fairness.md); records of Redisson, and of earlier versions of this
// library, are not marked.
func (m Member) GoMarked() bool {
	if m.Format == FormatFI {
		if len(m.Random) != 4 {
			return false
		}
		return binary.LittleEndian.Uint32(m.Random)>>23&0xff >= goFloatMinExp
	}
	return len(m.Random) >= len(goMark) && string(m.Random[:len(goMark)]) == goMark
}

// GoTag returns the RecordTag of the Client that wrote the record (8 hex
// digits) and true, or "" and false for a record that carries none:
// Redisson's, and FormatFI records (too short for one).
func (m Member) GoTag() (string, bool) {
	if m.Format == FormatFI || !m.GoMarked() {
		return "", false
	}
	rest := m.Random[len(goMark):]
	switch m.Format {
	case FormatBc0I:
		if len(rest) != goTagLen+8 {
			return "", false
		}
		return hex.EncodeToString(rest[:goTagLen]), true
	default:
		if len(rest) <= 2*goTagLen {
			return "", false
		}
		tag := rest[:2*goTagLen]
		if _, err := hex.DecodeString(string(tag)); err != nil || strings.ToLower(string(tag)) != string(tag) {
			return "", false
		}
		return string(tag), true
	}
}
