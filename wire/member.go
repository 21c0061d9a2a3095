package wire

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
)

// ErrRandom is returned by Encode for a random part whose length the
// format cannot hold, or for an unknown format.
var ErrRandom = errors.New("wire: random part does not fit the format")

// ErrRecord is returned by Decode for bytes that fit no known format.
var ErrRecord = errors.New("wire: permit record fits no known format")

// Member is one decoded permit record.
type Member struct {
	// Format is the layout the record was written in.
	Format Format
	// Random is the part that keeps records unique: 16 bytes for Bc0I (8
	// from Redisson 3.17 to 3.20), the text or bytes of Lc0I, the 4 float
	// bytes for FI.
	Random []byte
	// Permits is the number of permits the acquisition took.
	Permits uint32
}

// Encode builds a permit record. random must be 4 bytes for FI and 1 to
// 255 bytes for the others, except 3 for Bc0I (Redisson writes 16 for
// Bc0I, 8 before 3.21): a Bc0I record with 3 random bytes is 8 bytes long
// and reads as FI. It fails with ErrRandom for another length or an
// unknown format, so that Decode gives back what Encode accepted.
func Encode(f Format, random []byte, permits uint32) ([]byte, error) {
	var out []byte
	switch f {
	case Bc0I:
		if len(random) < 1 || len(random) > 255 || len(random) == 3 {
			return nil, fmt.Errorf("%w: Bc0I takes 1 to 255 bytes but 3 (an 8-byte record reads as fI), got %d", ErrRandom, len(random))
		}
		out = append(append(make([]byte, 0, 5+len(random)), byte(len(random))), random...)
	case Lc0I:
		if len(random) < 1 || len(random) > 255 {
			return nil, fmt.Errorf("%w: Lc0I takes 1 to 255 bytes, got %d", ErrRandom, len(random))
		}
		out = binary.LittleEndian.AppendUint64(make([]byte, 0, 12+len(random)), uint64(len(random)))
		out = append(out, random...)
	case FI:
		if len(random) != 4 {
			return nil, fmt.Errorf("%w: fI takes 4 bytes, got %d", ErrRandom, len(random))
		}
		out = append(make([]byte, 0, 8), random...)
	default:
		return nil, fmt.Errorf("%w: unknown format %d", ErrRandom, int(f))
	}
	return binary.LittleEndian.AppendUint32(out, permits), nil
}

// Decode reads a permit record written by any Redisson generation. It
// recognises the format from the record's shape and fails with ErrRecord
// for bytes that fit none of them.
func Decode(b []byte) (Member, error) {
	if len(b) < 6 {
		return Member{}, fmt.Errorf("%w: %d bytes", ErrRecord, len(b))
	}
	permits := binary.LittleEndian.Uint32(b[len(b)-4:])
	switch {
	case len(b) == 8:
		return Member{Format: FI, Random: b[:4], Permits: permits}, nil
	case int(b[0]) == len(b)-5:
		return Member{Format: Bc0I, Random: b[1 : len(b)-4], Permits: permits}, nil
	case len(b) >= 13 && binary.LittleEndian.Uint64(b) == uint64(len(b)-12):
		return Member{Format: Lc0I, Random: b[8 : len(b)-4], Permits: permits}, nil
	}
	return Member{}, fmt.Errorf("%w: %x", ErrRecord, b)
}

// Tag is a Client's record tag: four bytes written in each of its Bc0I and
// Lc0I records, so that tools can tell its records from other Clients'.
type Tag [4]byte

// New makes a fresh record for permits in format f, marked as this
// library's and, in Bc0I and Lc0I, carrying tag. The rest of the random
// part only has to keep records unique, so a fast non-cryptographic
// source does. An invalid f is written as Bc0I.
func New(f Format, tag Tag, permits uint32) []byte {
	return NewSeeded(f, tag, rand.Uint64(), permits)
}

// NewSeeded is New with the random part made from seed alone, so that
// every Client that knows seed writes the same bytes: a record that many
// Clients may write for one event, where ZADD NX keeps only the first.
func NewSeeded(f Format, tag Tag, seed uint64, permits uint32) []byte {
	// The random part is built on the stack (Encode copies it): one
	// allocation per record, the record's own.
	var buf [64]byte
	random := append(buf[:0], goMark...)
	switch f {
	case Lc0I:
		random = hex.AppendEncode(random, tag[:])
		random = strconv.AppendInt(random, int64(seed), 10)
	case FI:
		// Redisson rounds a random int64 to float32: its exponent field is
		// at most 190 (|x| <= 2^63). Ours is 192 to 253: a finite float
		// that reads the same to every Redisson and that Redisson never
		// writes, with about 2^30 distinct values. No room for a tag: 254
		// is the probe record's (ProbeRecord).
		if tag == ProbeTag {
			random = binary.LittleEndian.AppendUint32(buf[:0], probeFloat)
			break
		}
		bits := uint32(seed)
		exp := goFloatMinExp + bits%(goFloatProbeExp-goFloatMinExp)
		random = binary.LittleEndian.AppendUint32(buf[:0], bits&0x807fffff|exp<<23)
	default:
		// 16 bytes, as Redisson 3.21 writes: the mark, the tag and 64
		// random bits, as unique within one Client as the 8 random bytes
		// of Redisson 3.17 to 3.20.
		f = Bc0I
		random = append(random, tag[:]...)
		random = binary.LittleEndian.AppendUint64(random, seed)
	}
	m, _ := Encode(f, random, permits)
	return m
}

// OwnMark returns the bytes by which a record that New writes in format f
// with tag is known as that tag's, and their 1-based offset in the record
// (the release scripts compare them, giveback.lua), or nil and 0 for FI,
// which has no room for a tag. An invalid f is Bc0I, as in New.
func OwnMark(f Format, tag Tag) ([]byte, int) {
	switch f {
	case FI:
		return nil, 0
	case Lc0I:
		return hex.AppendEncode([]byte(goMark), tag[:]), 9 // after the 8-byte length
	}
	return append([]byte(goMark), tag[:]...), 2 // after the length byte
}

// goMark starts the random part of every Bc0I and Lc0I record this
// library writes. Redisson never reads a record's random part (it unpacks
// the permits only), so the mark is invisible to it, and Redisson's own
// random parts begin with these four bytes once in 2^32 records.
const goMark = "GoRL"

// goFloatMinExp is the lowest float32 exponent field of an FI record this
// library writes; Redisson's are at most 190. goFloatProbeExp is the
// probe record's, and no other record's (before the probe record, a random
// record had it once in 63).
const (
	goFloatMinExp   = 192
	goFloatProbeExp = 254
	probeFloat      = goFloatProbeExp << 23 // 2^127: sign and mantissa 0
)

// GoMarked reports whether the record was written by this library: its
// random part carries the mark this library writes since v0.1.0 (docs/
// fairness.md); records of Redisson, and of earlier versions of this
// library, are not marked.
func (m Member) GoMarked() bool {
	if m.Format == FI {
		if len(m.Random) != 4 {
			return false
		}
		return binary.LittleEndian.Uint32(m.Random)>>23&0xff >= goFloatMinExp
	}
	return len(m.Random) >= len(goMark) && string(m.Random[:len(goMark)]) == goMark
}

// GoTag returns the Tag of the Client that wrote the record (8 hex digits)
// and true, or "" and false for a record that carries none: Redisson's,
// and FI records (too short for one).
func (m Member) GoTag() (string, bool) {
	if m.Format == FI || !m.GoMarked() {
		return "", false
	}
	rest := m.Random[len(goMark):]
	switch m.Format {
	case Bc0I:
		if len(rest) != len(Tag{})+8 {
			return "", false
		}
		return hex.EncodeToString(rest[:len(Tag{})]), true
	default:
		if len(rest) <= 2*len(Tag{}) {
			return "", false
		}
		tag := rest[:2*len(Tag{})]
		if _, err := hex.DecodeString(string(tag)); err != nil || strings.ToLower(string(tag)) != string(tag) {
			return "", false
		}
		return string(tag), true
	}
}

// Writer names who wrote the record: "redisson" for an unmarked one
// (Redisson's, or a Go client's of a version that did not mark), "fill"
// for a fill record (FillTag), "probe" for the probe record (ProbeTag),
// "go:" and the Client's tag for a tagged one, "go" for a marked one
// without a tag (FI).
func (m Member) Writer() string {
	if !m.GoMarked() {
		return "redisson"
	}
	if m.Fill() {
		return "fill"
	}
	if m.Probe() {
		return "probe"
	}
	if tag, ok := m.GoTag(); ok {
		return "go:" + tag
	}
	return "go"
}

// FillTag tags the records that fill a window after its server restarted,
// was replaced by a replica or had its clock jump (docs/operations.md,
// "Restarts, failovers and clock steps"): they hold permits that no caller
// was granted, so that the grants the window lost are not made again. No
// Client writes it on its own records.
var FillTag = Tag{'f', 'i', 'l', 'l'}

// Fill reports whether the record is a fill record (FillTag). An FI
// record has no tag: a fill record in FI reads as an ordinary Go record.
func (m Member) Fill() bool {
	tag, ok := m.GoTag()
	return ok && tag == hex.EncodeToString(FillTag[:])
}

// ProbeTag tags the probe record (docs/fairness.md, "The probe record"):
// one permit of a grant that this library's scripts give back only
// ProbeHold after the record expires, so that a Redisson waiter, which
// takes it as soon as it expires, gets in beside a Go fleet. No Client
// writes it on its own records.
var ProbeTag = Tag{'p', 'r', 'o', 'b'}

// ProbeRecord returns the probe record in format f: one permit, the same
// bytes for every Client, so a limiter has at most one. In Bc0I and Lc0I
// it carries ProbeTag; in FI, which has no room for a tag, its float is
// 2^127, an exponent field no other record has. An invalid f is Bc0I, as
// in New.
func ProbeRecord(f Format) []byte {
	return NewSeeded(f, ProbeTag, 0, 1)
}

// Probe reports whether the record is the probe record (ProbeRecord of
// its format).
func (m Member) Probe() bool {
	if m.Permits != 1 {
		return false
	}
	p, err := Decode(ProbeRecord(m.Format))
	return err == nil && string(p.Random) == string(m.Random)
}
