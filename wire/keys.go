package wire

import "strings"

// Keys are the Redis keys of one limiter as seen by one client, named as
// Redisson names them (docs/protocol.md, section 1).
type Keys struct {
	// Config is the hash holding rate, interval, type and keepAliveTime.
	Config string
	// Value holds the permits still available in OVERALL mode.
	Value string
	// ClientValue holds this client's available permits in PER_CLIENT mode.
	ClientValue string
	// Permits is the sorted set of OVERALL permit records.
	Permits string
	// ClientPermits is the sorted set of this client's PER_CLIENT records.
	ClientPermits string
}

// KeysFor returns the keys of the limiter whose config key is name, for
// the client whose id is clientID. A name that already carries a '{'
// keeps its own hash tag; any other is wrapped so that all keys share
// one, as Redisson names them.
func KeysFor(name, clientID string) Keys {
	open, shut := "{", "}"
	if strings.Contains(name, "{") {
		open, shut = "", ""
	}
	// The four derived keys are substrings of one string (each client key
	// extends its mode's key): a server that opens a limiter by name for
	// every decision (one per user) makes one allocation for them, not four.
	base := len(open) + len(name) + len(shut)
	var b strings.Builder
	b.Grow(2*base + len(":value:") + len(":permits:") + 2*len(clientID))
	for _, mode := range []string{":value", ":permits"} {
		b.WriteString(open)
		b.WriteString(name)
		b.WriteString(shut)
		b.WriteString(mode)
		b.WriteString(":")
		b.WriteString(clientID)
	}
	s := b.String()
	value := base + len(":value")
	client := value + 1 + len(clientID)
	permits := client + base + len(":permits")
	return Keys{
		Config:        name,
		Value:         s[:value],
		ClientValue:   s[:client],
		Permits:       s[client:permits],
		ClientPermits: s[client:],
	}
}

// All returns the five keys, Config first.
func (k Keys) All() []string {
	return []string{k.Config, k.Value, k.ClientValue, k.Permits, k.ClientPermits}
}

// SameSlot reports whether every key hashes to one Redis Cluster slot.
func (k Keys) SameSlot() bool {
	keys := k.All()
	for _, key := range keys[1:] {
		if Slot(key) != Slot(keys[0]) {
			return false
		}
	}
	return true
}

// SameTag reports whether all five keys hash by one tag, as go-redis's
// Ring shards them: the hash tag if the key has one, else the whole key.
func (k Keys) SameTag() bool {
	keys := k.All()
	for _, key := range keys[1:] {
		if HashTag(key) != HashTag(keys[0]) {
			return false
		}
	}
	return true
}

// HashTag returns the part of key that Redis Cluster and go-redis's Ring
// hash: the text between the first '{' and the next '}' if not empty,
// else key.
func HashTag(key string) string {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			return key[i+1 : i+1+j]
		}
	}
	return key
}

// Slot returns key's Redis Cluster slot (HASH_SLOT): CRC16 of the key, or
// of its hash tag, modulo 16384.
func Slot(key string) uint16 {
	return crc16(HashTag(key)) & 16383
}

// crc16 is CRC-16/XMODEM, the checksum Redis Cluster uses.
func crc16(s string) uint16 {
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc ^= uint16(s[i]) << 8
		for b := 0; b < 8; b++ {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}
