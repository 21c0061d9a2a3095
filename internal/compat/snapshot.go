package compat

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"

	"github.com/redis/go-redis/v9"
)

// Snapshot is the Redis state a Redisson version leaves after the fixed
// recording sequence (see TestRecordSnapshots), as stored in
// testdata/redisson-<version>.json.
type Snapshot struct {
	RedissonVersion string `json:"redisson_version"`
	// MemberFormat is what the permit records observed in Redis look like,
	// judged from their bytes alone ("Bc0I", "Lc0I" or "fI").
	MemberFormat string `json:"member_format"`
	// MemberRandomLen is the length of the records' random part.
	MemberRandomLen int `json:"member_random_len"`
	// ClientID is redisson.getId() of the client that ran the steps of
	// "client": "plain"; MappedClientID that of the client with the name
	// mapper name -> NamePrefix+name ("client": "mapped").
	ClientID       string `json:"client_id"`
	MappedClientID string `json:"mapped_client_id"`
	NamePrefix     string `json:"name_prefix"`
	// Steps are the calls made, in order, with the peer's answers.
	Steps []Step `json:"steps"`
	// Keys is every key in Redis afterwards, sorted by name.
	Keys []KeyState `json:"keys"`
}

// Step is one call of the recording sequence.
type Step struct {
	Client  string   `json:"client"` // "plain" or "mapped"
	Command []string `json:"command"`
	Answer  string   `json:"answer"` // "OK ..." or "ERR Class message"
}

// KeyState is one key's type and content.
type KeyState struct {
	Key    string `json:"key"`
	Type   string `json:"type"`
	HasTTL bool   `json:"has_ttl"`
	// Hash is set for a hash, String for a string, Members for a sorted set.
	Hash    map[string]string `json:"hash,omitempty"`
	String  *string           `json:"string,omitempty"`
	Members []MemberState     `json:"members,omitempty"`
}

// MemberState is one sorted-set member.
type MemberState struct {
	Hex string `json:"hex"`
	// ScoreOffsetMs is the score minus the smallest score of all members in
	// the snapshot.
	ScoreOffsetMs int64 `json:"score_offset_ms"`
	// Permits is the member's last four bytes as uint32 little-endian.
	Permits uint32 `json:"permits"`
}

// ObserveFormat names the layout of one permit record from its bytes alone,
// independently of the library's decoder, as the Lua struct format that
// unpacks it: "fI" (8 bytes: float32 holding an integer value, uint32),
// "Bc0I" (a length byte n, n random bytes, uint32), "Lc0I" (uint64 length n,
// n random bytes, uint32; Redisson 3.16.4-3.16.8 put 8 raw random bytes
// there), or "" if none fits. randomLen is
// the length of the random part.
func ObserveFormat(b []byte) (format string, randomLen int) {
	switch {
	case len(b) == 8:
		f := float64(math.Float32frombits(binary.LittleEndian.Uint32(b[:4])))
		if !math.IsNaN(f) && !math.IsInf(f, 0) && f == math.Trunc(f) {
			return "fI", 4
		}
	case len(b) >= 5 && int(b[0]) == len(b)-5:
		return "Bc0I", len(b) - 5
	case len(b) > 12 && binary.LittleEndian.Uint64(b[:8]) == uint64(len(b)-12):
		return "Lc0I", len(b) - 12
	}
	return "", 0
}

// JavaUnpackPermits is what a Redisson script that unpacks records with the
// Lua struct format javaFormat ("Bc0I", "Lc0I" or "fI") reads as the permits
// of record b, following struct.unpack's rules (a length prefix says how many
// bytes to skip; a record too short for the format is an error).
func JavaUnpackPermits(javaFormat string, b []byte) (uint32, error) {
	var off int
	switch javaFormat {
	case "fI":
		off = 4
	case "Bc0I":
		if len(b) < 1 {
			return 0, fmt.Errorf("empty record")
		}
		off = 1 + int(b[0])
	case "Lc0I":
		if len(b) < 8 {
			return 0, fmt.Errorf("record of %d bytes too short for Lc0I", len(b))
		}
		n := binary.LittleEndian.Uint64(b[:8])
		if n > uint64(len(b)) {
			return 0, fmt.Errorf("Lc0I length %d beyond record of %d bytes", n, len(b))
		}
		off = 8 + int(n)
	default:
		return 0, fmt.Errorf("unknown format %q", javaFormat)
	}
	if off+4 > len(b) {
		return 0, fmt.Errorf("record %x too short for %s", b, javaFormat)
	}
	return binary.LittleEndian.Uint32(b[off : off+4]), nil
}

// TakeSnapshot reads every key of the (otherwise empty) database.
func TakeSnapshot(ctx context.Context, c *redis.Client) ([]KeyState, error) {
	keys, err := c.Keys(ctx, "*").Result()
	if err != nil {
		return nil, err
	}
	sort.Strings(keys)
	var out []KeyState
	minScore := math.Inf(1)
	type rawMember struct {
		idx   int
		score float64
	}
	var raws []rawMember
	for _, k := range keys {
		typ, err := c.Type(ctx, k).Result()
		if err != nil {
			return nil, err
		}
		ttl, err := c.PTTL(ctx, k).Result()
		if err != nil {
			return nil, err
		}
		ks := KeyState{Key: k, Type: typ, HasTTL: ttl > 0}
		switch typ {
		case "hash":
			ks.Hash, err = c.HGetAll(ctx, k).Result()
		case "string":
			var s string
			s, err = c.Get(ctx, k).Result()
			ks.String = &s
		case "zset":
			var zs []redis.Z
			zs, err = c.ZRangeWithScores(ctx, k, 0, -1).Result()
			for _, z := range zs {
				b := []byte(z.Member.(string))
				if len(b) < 4 {
					return nil, fmt.Errorf("member %x of %s is shorter than 4 bytes", b, k)
				}
				ks.Members = append(ks.Members, MemberState{
					Hex:     hex.EncodeToString(b),
					Permits: binary.LittleEndian.Uint32(b[len(b)-4:]),
				})
				raws = append(raws, rawMember{idx: len(out), score: z.Score})
				minScore = math.Min(minScore, z.Score)
			}
		default:
			err = fmt.Errorf("unexpected type %s of key %s", typ, k)
		}
		if err != nil {
			return nil, err
		}
		out = append(out, ks)
	}
	// Fill in score offsets now that the minimum is known.
	pos := map[int]int{}
	for _, r := range raws {
		j := pos[r.idx]
		out[r.idx].Members[j].ScoreOffsetMs = int64(r.score - minScore)
		pos[r.idx] = j + 1
	}
	return out, nil
}

// SnapshotPath is testdata/redisson-<version>.json beside this file.
func SnapshotPath(version string) string {
	return filepath.Join(Dir(), "testdata", "redisson-"+version+".json")
}

// LoadSnapshot reads a recorded snapshot.
func LoadSnapshot(version string) (*Snapshot, error) {
	b, err := os.ReadFile(SnapshotPath(version))
	if err != nil {
		return nil, err
	}
	var s Snapshot
	if err := jsonUnmarshalStrict(b, &s); err != nil {
		return nil, fmt.Errorf("%s: %w", SnapshotPath(version), err)
	}
	return &s, nil
}

func jsonUnmarshalStrict(b []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	return d.Decode(v)
}
