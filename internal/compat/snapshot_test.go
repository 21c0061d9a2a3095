package compat

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	ratelimiter "github.com/goredisson/ratelimiter"
	"github.com/goredisson/ratelimiter/internal/redistest"
	"github.com/goredisson/ratelimiter/wire"
)

// These tests need neither Java nor Redis: they check the library's member
// codec and key layout against the state real Redisson left in Redis
// (testdata/redisson-<version>.json, recorded by TestRecordSnapshots).
// Only TestSnapshotKeyLayout/go-clients-write-them needs a redis-server (it
// skips without one, and fails under CI): it replays the recording with Go
// Clients.

// observedFormat is the member format each version was seen to write when
// recorded (Lua struct format, random part length). Note 3.20.1: the first written spec
// lists it under Lc0I, but it writes (and unpacks) Bc0I with 8 random bytes;
// Lc0I is what 3.16.8 writes (observed), with 8 raw random bytes, not
// the decimal text the first written spec describes.
var observedFormat = map[string]struct {
	format    string
	randomLen int
}{
	"4.7.0":  {"Bc0I", 16},
	"3.52.0": {"Bc0I", 16},
	"3.20.1": {"Bc0I", 8},
	"3.16.8": {"Lc0I", 8},
	"3.16.3": {"fI", 4},
}

func mustHex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatalf("bad hex %q: %v", s, err)
	}
	return b
}

func loadSnapshots(t *testing.T) map[string]*Snapshot {
	t.Helper()
	out := map[string]*Snapshot{}
	for _, v := range Versions {
		s, err := LoadSnapshot(v)
		if err != nil {
			t.Fatalf("load snapshot %s: %v (re-record with COMPAT_RECORD=1 go test ./internal/compat -run TestRecordSnapshots)", v, err)
		}
		if s.RedissonVersion != v {
			t.Fatalf("%s: snapshot says version %s", SnapshotPath(v), s.RedissonVersion)
		}
		out[v] = s
	}
	return out
}

func TestSnapshotMemberFormat(t *testing.T) {
	for v, s := range loadSnapshots(t) {
		want := observedFormat[v]
		if s.MemberFormat != want.format || s.MemberRandomLen != want.randomLen {
			t.Errorf("Redisson %s: recorded member format %s/%d, expected %s/%d", v, s.MemberFormat, s.MemberRandomLen, want.format, want.randomLen)
		}
		for _, k := range s.Keys {
			for _, m := range k.Members {
				if f, n := ObserveFormat(mustHex(t, m.Hex)); f != s.MemberFormat || n != s.MemberRandomLen {
					t.Errorf("%s: member %s observed as %s/%d", v, m.Hex, f, n)
				}
			}
		}
	}
}

// TestSnapshotDecodeEncode decodes every member Java wrote with the library's
// DecodeMember, and re-encodes it with EncodeMember: the bytes must be identical.
func TestSnapshotDecodeEncode(t *testing.T) {
	for v, s := range loadSnapshots(t) {
		n := 0
		for _, k := range s.Keys {
			for _, m := range k.Members {
				b := mustHex(t, m.Hex)
				dm, err := wire.Decode(b)
				if err != nil {
					t.Errorf("%s %s: DecodeMember(%s): %v", v, k.Key, m.Hex, err)
					continue
				}
				n++
				if got := dm.Format.String(); got != s.MemberFormat {
					t.Errorf("%s %s: DecodeMember(%s).Format = %s, observed %s", v, k.Key, m.Hex, got, s.MemberFormat)
				}
				if dm.Permits != m.Permits {
					t.Errorf("%s %s: DecodeMember(%s).Permits = %d, want %d", v, k.Key, m.Hex, dm.Permits, m.Permits)
				}
				enc, err := wire.Encode(dm.Format, dm.Random, dm.Permits)
				if err != nil {
					t.Errorf("%s: EncodeMember(%v, %x, %d): %v", v, dm.Format, dm.Random, dm.Permits, err)
					continue
				}
				if !bytes.Equal(enc, b) {
					t.Errorf("%s: re-encoded member %x, Java wrote %x", v, enc, b)
				}
			}
		}
		if n == 0 {
			t.Errorf("%s: no member of the snapshot could be decoded", v)
		}
	}
}

// TestSnapshotEncoderLayout builds members with the library's encoder in the
// format the Go client is configured to write next to each version
// (formatFor) and checks that the version's own unpack format reads the right
// permits from them, for small and for the largest permit counts.
func TestSnapshotEncoderLayout(t *testing.T) {
	for v, s := range loadSnapshots(t) {
		f := formatFor(v)
		for _, permits := range []uint32{1, 7, 1 << 16, 4294967295} {
			var random []byte
			switch f {
			case wire.Bc0I:
				random = bytes.Repeat([]byte{0xa5}, 16)
			case wire.Lc0I:
				random = []byte("-1234567890123456789")
			case wire.FI:
				random = []byte{0x00, 0x00, 0x80, 0x5e} // 2^62 as float32
			}
			enc, err := wire.Encode(f, random, permits)
			if err != nil {
				t.Fatalf("%s: EncodeMember(%v): %v", v, f, err)
			}
			got, err := JavaUnpackPermits(s.MemberFormat, enc)
			if err != nil || got != permits {
				t.Errorf("Redisson %s (unpacks %s) reads Go's %v member %x as %d, %v; want %d", v, s.MemberFormat, f, enc, got, err, permits)
			}
			dm, err := wire.Decode(enc)
			if err != nil || dm.Permits != permits || dm.Format != f || !bytes.Equal(dm.Random, random) {
				t.Errorf("%s: DecodeMember(EncodeMember(%v, %x, %d)) = %+v, %v", v, f, random, permits, dm, err)
			}
		}
	}
}

// TestSnapshotOtherFormatsMisread is the Java-free half of
// TestMemberFormatMatters: for every version, records in each format other
// than formatFor's are misread (or not readable at all) by the version's own
// unpack format, so formatFor's choice is the only one that works.
func TestSnapshotOtherFormatsMisread(t *testing.T) {
	randoms := map[wire.Format][]byte{
		wire.Bc0I: bytes.Repeat([]byte{0xa5}, 16),
		wire.Lc0I: []byte("-1234567890123456789"),
		wire.FI:   {0x00, 0x00, 0x80, 0x5e},
	}
	for v, s := range loadSnapshots(t) {
		for f, random := range randoms {
			if f == formatFor(v) {
				continue
			}
			const permits = 3
			enc, err := wire.Encode(f, random, permits)
			if err != nil {
				t.Fatal(err)
			}
			got, err := JavaUnpackPermits(s.MemberFormat, enc)
			if err == nil && got == permits {
				t.Errorf("Redisson %s (unpacks %s) reads a %v record %x right: formatFor(%s) = %v is not the only choice", v, s.MemberFormat, f, enc, v, formatFor(v))
			}
		}
	}
}

// limiterExpect is what the steps of a snapshot imply for one limiter.
type limiterExpect struct {
	client  string // plain or mapped
	mode    string // OVERALL or PER_CLIENT
	rate    int64
	permits []uint32 // granted acquisitions
	kaSet   bool     // trySetRate with a keepAlive that the version accepted
}

func expectations(t *testing.T, s *Snapshot) map[string]*limiterExpect {
	lims := map[string]*limiterExpect{}
	for _, st := range s.Steps {
		name := st.Command[1]
		switch st.Command[0] {
		case "trySetRate":
			if st.Answer != "OK true" {
				if strings.HasPrefix(st.Answer, "ERR Unsupported") {
					continue
				}
				t.Fatalf("%s: step %v answered %s", s.RedissonVersion, st.Command, st.Answer)
			}
			rate, _ := strconv.ParseInt(st.Command[3], 10, 64)
			lims[name] = &limiterExpect{client: st.Client, mode: st.Command[2], rate: rate, kaSet: len(st.Command) > 5}
		case "tryAcquire":
			l := lims[name]
			if l == nil {
				continue
			}
			if st.Answer != "OK true" {
				t.Fatalf("%s: step %v answered %s", s.RedissonVersion, st.Command, st.Answer)
			}
			n, _ := strconv.ParseUint(st.Command[2], 10, 32)
			l.permits = append(l.permits, uint32(n))
		}
	}
	return lims
}

// TestSnapshotKeyLayout derives every limiter's keys with the library
// (wire.KeysFor of the mapped name and the id of a Client made with the
// Java clients' client id and name mapper) and checks that they are
// exactly the keys Java wrote, with the contents the steps imply. Its
// subtest go-clients-write-them, which needs a redis-server, replays the
// steps with such Go Clients and checks that they write exactly the keys
// Java wrote: the Client derives its keys as wire.KeysFor does.
func TestSnapshotKeyLayout(t *testing.T) {
	rc := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never used: the derivation needs no I/O
	defer rc.Close()
	snaps := loadSnapshots(t)
	for v, s := range snaps {
		plain := ratelimiter.NewClient(rc, ratelimiter.WithClientID(s.ClientID))
		mapName := snapshotMapper(s)
		mapped := ratelimiter.NewClient(rc, ratelimiter.WithClientID(s.MappedClientID), ratelimiter.WithNameMapper(mapName))
		if plain.ID() != s.ClientID || mapped.ID() != s.MappedClientID {
			t.Fatalf("ID() = %s, %s; want %s, %s", plain.ID(), mapped.ID(), s.ClientID, s.MappedClientID)
		}
		got := map[string]KeyState{}
		for _, k := range s.Keys {
			got[k.Key] = k
		}
		seen := map[string]bool{}
		for name, l := range expectations(t, s) {
			keys := wire.KeysFor(name, plain.ID())
			if l.client == "mapped" {
				keys = wire.KeysFor(mapName(name), mapped.ID())
			}
			valueKey, permitsKey := keys.Value, keys.Permits
			if l.mode == "PER_CLIENT" {
				valueKey, permitsKey = keys.ClientValue, keys.ClientPermits
			}
			// Config hash.
			cfg, ok := got[keys.Config]
			if !ok || cfg.Type != "hash" {
				t.Errorf("%s %s: no config hash at library key %q (keys: %v)", v, name, keys.Config, keyNames(s))
				continue
			}
			seen[keys.Config] = true
			wantType := map[string]string{"OVERALL": "0", "PER_CLIENT": "1"}[l.mode]
			if cfg.Hash["rate"] != strconv.FormatInt(l.rate, 10) || cfg.Hash["type"] != wantType || cfg.Hash["interval"] != "60000" {
				t.Errorf("%s %s: config hash %v", v, name, cfg.Hash)
			}
			_, hasKA := cfg.Hash["keepAliveTime"]
			if hasKA != versionAtLeast(v, "3.38.0") {
				t.Errorf("%s %s: keepAliveTime field present=%v", v, name, hasKA)
			}
			if cfg.HasTTL != l.kaSet {
				t.Errorf("%s %s: config TTL present=%v, keepAlive set=%v", v, name, cfg.HasTTL, l.kaSet)
			}
			// Value key: rate minus what was taken.
			var used uint32
			for _, p := range l.permits {
				used += p
			}
			val, ok := got[valueKey]
			if !ok || val.Type != "string" || val.String == nil {
				t.Errorf("%s %s: no value string at library key %q (keys: %v)", v, name, valueKey, keyNames(s))
				continue
			}
			seen[valueKey] = true
			if want := strconv.FormatInt(l.rate-int64(used), 10); *val.String != want {
				t.Errorf("%s %s: value %s, want %s", v, name, *val.String, want)
			}
			// Permits set: the decoded permits are exactly the granted acquisitions.
			zs, ok := got[permitsKey]
			if !ok || zs.Type != "zset" {
				t.Errorf("%s %s: no permits zset at library key %q (keys: %v)", v, name, permitsKey, keyNames(s))
				continue
			}
			seen[permitsKey] = true
			var dec []uint32
			for _, m := range zs.Members {
				dm, err := wire.Decode(mustHex(t, m.Hex))
				if err != nil {
					t.Errorf("%s %s: %v", v, name, err)
					continue
				}
				dec = append(dec, dm.Permits)
				if m.ScoreOffsetMs < 0 || m.ScoreOffsetMs > 60000 {
					t.Errorf("%s %s: score offset %d outside the recording", v, name, m.ScoreOffsetMs)
				}
			}
			if fmt.Sprint(sorted(dec)) != fmt.Sprint(sorted(l.permits)) {
				t.Errorf("%s %s: decoded permits %v, acquired %v", v, name, dec, l.permits)
			}
			if val.HasTTL != l.kaSet || zs.HasTTL != l.kaSet {
				t.Errorf("%s %s: value/permits TTL %v/%v, keepAlive set=%v", v, name, val.HasTTL, zs.HasTTL, l.kaSet)
			}
		}
		for _, k := range s.Keys {
			if !seen[k.Key] {
				t.Errorf("%s: Java wrote key %q that the library's layout does not name", v, k.Key)
			}
		}
	}
	t.Run("go-clients-write-them", func(t *testing.T) { replaySnapshots(t, snaps) })
}

// snapshotMapper is the name mapper of the snapshot's "mapped" client.
func snapshotMapper(s *Snapshot) func(string) string {
	return func(n string) string { return s.NamePrefix + n }
}

// replaySnapshots makes, for every snapshot, the steps Java answered
// (but those the version does not support) with Go Clients that have
// the Java clients' client ids and name mapper, on an empty redis-server
// of its own, and checks that Go answers as Java did and leaves exactly
// the keys Java left: same names, types and TTLs, the same config fields
// and values, and records of the same permits.
func replaySnapshots(t *testing.T, snaps map[string]*Snapshot) {
	needServer(t)
	ctx := ctxT(t, time.Minute)
	srv, err := redistest.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	rc := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer rc.Close()
	modes := map[string]ratelimiter.Mode{"OVERALL": ratelimiter.Overall, "PER_CLIENT": ratelimiter.PerClient}
	modeNames := map[ratelimiter.Mode]string{ratelimiter.Overall: "OVERALL", ratelimiter.PerClient: "PER_CLIENT"}
	for _, v := range Versions {
		s := snaps[v]
		check(t, rc.FlushAll(ctx).Err(), "FLUSHALL")
		opt := ratelimiter.WithMemberFormat(formatFor(v))
		clients := map[string]*ratelimiter.Client{
			"plain": ratelimiter.NewClient(rc, opt, ratelimiter.WithClientID(s.ClientID)),
			"mapped": ratelimiter.NewClient(rc, opt, ratelimiter.WithClientID(s.MappedClientID),
				ratelimiter.WithNameMapper(snapshotMapper(s))),
		}
		for _, st := range s.Steps {
			if strings.HasPrefix(st.Answer, "ERR Unsupported") {
				continue // a Redisson limitation (keepAlive before 3.38.0), not the layout
			}
			cmd, l := st.Command, clients[st.Client].Limiter(st.Command[1])
			num := func(i int) int64 {
				n, err := strconv.ParseInt(cmd[i], 10, 64)
				if err != nil {
					t.Fatalf("%s: step %v: %v", v, cmd, err)
				}
				return n
			}
			var res any
			switch cmd[0] {
			case "trySetRate":
				cfg := ratelimiter.Config{Mode: modes[cmd[2]], Rate: num(3), Interval: time.Duration(num(4)) * time.Millisecond}
				if len(cmd) > 5 {
					cfg.KeepAlive = time.Duration(num(5)) * time.Millisecond
				}
				res, err = l.TrySetRate(ctx, cfg)
			case "tryAcquire":
				res, err = l.TryAcquire(ctx, num(2))
			case "availablePermits":
				res, err = l.AvailablePermits(ctx)
			case "getConfig":
				var cfg ratelimiter.Config
				cfg, err = l.Config(ctx)
				res = fmt.Sprintf("%s %d %d", modeNames[cfg.Mode], cfg.Rate, cfg.Interval.Milliseconds())
			default:
				t.Fatalf("%s: step %v not replayed", v, cmd)
			}
			if strings.HasPrefix(st.Answer, "ERR ") {
				if err == nil || strings.Contains(st.Answer, "not initialized") && !errors.Is(err, ratelimiter.ErrNotInitialized) {
					t.Errorf("%s: Go %s %v = %v, %v; Java failed: %.80s", v, st.Client, cmd, res, err, st.Answer)
				}
				continue
			}
			if got := fmt.Sprint("OK ", res); err != nil || got != st.Answer {
				t.Errorf("%s: Go %s %v = %q, %v; Java answered %q", v, st.Client, cmd, got, err, st.Answer)
			}
		}
		written, err := TakeSnapshot(ctx, rc)
		check(t, err, "read the keys")
		javaKeys := map[string]KeyState{}
		for _, k := range s.Keys {
			javaKeys[k.Key] = k
		}
		for _, g := range written {
			j, ok := javaKeys[g.Key]
			if !ok {
				t.Errorf("%s: the Go Clients wrote key %q, which Java did not (Java's: %v)", v, g.Key, keyNames(s))
				continue
			}
			delete(javaKeys, g.Key)
			if g.Type != j.Type || g.HasTTL != j.HasTTL {
				t.Errorf("%s: key %q: Go wrote a %s (TTL %v), Java a %s (TTL %v)", v, g.Key, g.Type, g.HasTTL, j.Type, j.HasTTL)
				continue
			}
			switch g.Type {
			case "hash":
				for _, f := range []string{"rate", "interval", "type", "keepAliveTime"} {
					if _, ok := j.Hash[f]; !ok && f == "keepAliveTime" {
						continue // before 3.38.0: Redisson has no keep-alive
					}
					if g.Hash[f] != j.Hash[f] {
						t.Errorf("%s: config %q: Go's %s = %q, Java's %q", v, g.Key, f, g.Hash[f], j.Hash[f])
					}
				}
			case "string":
				if *g.String != *j.String {
					t.Errorf("%s: value %q: Go's %s, Java's %s", v, g.Key, *g.String, *j.String)
				}
			case "zset":
				if gp, jp := memberPermits(t, g), memberPermits(t, j); fmt.Sprint(gp) != fmt.Sprint(jp) {
					t.Errorf("%s: permits %q: Go's records hold %v, Java's %v", v, g.Key, gp, jp)
				}
			}
		}
		for _, k := range s.Keys {
			if _, missed := javaKeys[k.Key]; missed {
				t.Errorf("%s: Java wrote key %q, the Go Clients did not", v, k.Key)
			}
		}
	}
}

// memberPermits returns the permits of a sorted set's records, sorted.
func memberPermits(t *testing.T, k KeyState) []uint32 {
	var p []uint32
	for _, m := range k.Members {
		dm, err := wire.Decode(mustHex(t, m.Hex))
		if err != nil {
			t.Errorf("%s: %v", k.Key, err)
			continue
		}
		p = append(p, dm.Permits)
	}
	return sorted(p)
}

func sorted(p []uint32) []uint32 {
	q := append([]uint32(nil), p...)
	sort.Slice(q, func(i, j int) bool { return q[i] < q[j] })
	return q
}

func keyNames(s *Snapshot) []string {
	var n []string
	for _, k := range s.Keys {
		n = append(n, k.Key)
	}
	return n
}
