package compat

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/goredisson/ratelimiter/internal/redistest"
)

// recordPrefix is the name mapper prefix of the "mapped" recording client.
const recordPrefix = "pfx:"

// recordSteps is the fixed sequence whose resulting Redis state is recorded
// per Redisson version. Intervals are long so nothing expires meanwhile.
var recordSteps = []Step{
	{Client: "plain", Command: []string{"trySetRate", "rec", "OVERALL", "10", "60000"}},
	{Client: "plain", Command: []string{"tryAcquire", "rec", "1"}},
	{Client: "plain", Command: []string{"tryAcquire", "rec", "2"}},
	{Client: "plain", Command: []string{"tryAcquire", "rec", "3"}},
	{Client: "plain", Command: []string{"availablePermits", "rec"}},
	{Client: "plain", Command: []string{"trySetRate", "rec-pc", "PER_CLIENT", "5", "60000"}},
	{Client: "plain", Command: []string{"tryAcquire", "rec-pc", "2"}},
	{Client: "plain", Command: []string{"availablePermits", "rec-pc"}},
	{Client: "plain", Command: []string{"trySetRate", "{tag}rec", "OVERALL", "10", "60000"}},
	{Client: "plain", Command: []string{"tryAcquire", "{tag}rec", "4"}},
	{Client: "plain", Command: []string{"trySetRate", "rec-ka", "OVERALL", "10", "60000", "120000"}},
	{Client: "plain", Command: []string{"tryAcquire", "rec-ka", "1"}},
	{Client: "mapped", Command: []string{"trySetRate", "mapped", "OVERALL", "7", "60000"}},
	{Client: "mapped", Command: []string{"tryAcquire", "mapped", "5"}},
	{Client: "mapped", Command: []string{"getConfig", "mapped"}},
}

// TestRecordSnapshots runs the fixed sequence on the real Redisson of every
// version against an empty redis-server and writes testdata/redisson-<v>.json.
// It only runs with COMPAT_RECORD=1 (the files are committed; the unit tests in
// snapshot_test.go read them without Java).
func TestRecordSnapshots(t *testing.T) {
	if os.Getenv("COMPAT_RECORD") != "1" {
		t.Skip("set COMPAT_RECORD=1 to re-record testdata/redisson-*.json with the Java peer")
	}
	needJava(t)
	for _, v := range Versions {
		t.Run(v, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			s, err := redistest.Start(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			c := redis.NewClient(&redis.Options{Addr: s.Addr()})
			defer c.Close()
			if err := c.FlushAll(ctx).Err(); err != nil {
				t.Fatal(err)
			}
			plain, err := StartPeer(ctx, PeerOptions{Version: v, Addr: s.Addr()})
			if err != nil {
				t.Fatal(err)
			}
			defer plain.Close()
			mapped, err := StartPeer(ctx, PeerOptions{Version: v, Addr: s.Addr(), NamePrefix: recordPrefix})
			if err != nil {
				t.Fatal(err)
			}
			defer mapped.Close()

			snap := &Snapshot{RedissonVersion: v, ClientID: plain.ID(), MappedClientID: mapped.ID(), NamePrefix: recordPrefix}
			for _, st := range recordSteps {
				p := plain
				if st.Client == "mapped" {
					p = mapped
				}
				args := make([]any, len(st.Command))
				for i, a := range st.Command {
					args[i] = a
				}
				res, err := p.Do(ctx, args...)
				var jerr *Error
				switch {
				case err == nil:
					st.Answer = strings.TrimSpace("OK " + res)
				case errors.As(err, &jerr):
					st.Answer = "ERR " + jerr.Class + " " + jerr.Message
				default:
					t.Fatal(err)
				}
				t.Logf("%s %v -> %s", st.Client, st.Command, st.Answer)
				snap.Steps = append(snap.Steps, st)
			}
			snap.Keys, err = TakeSnapshot(ctx, c)
			if err != nil {
				t.Fatal(err)
			}
			for _, k := range snap.Keys {
				for _, m := range k.Members {
					b := mustHex(t, m.Hex)
					f, n := ObserveFormat(b)
					if f == "" {
						t.Fatalf("member %s of %s fits no known format", m.Hex, k.Key)
					}
					if snap.MemberFormat != "" && (snap.MemberFormat != f || snap.MemberRandomLen != n) {
						t.Fatalf("mixed member formats %s/%d and %s/%d", snap.MemberFormat, snap.MemberRandomLen, f, n)
					}
					snap.MemberFormat, snap.MemberRandomLen = f, n
				}
			}
			if snap.MemberFormat == "" {
				t.Fatal("no permit records written")
			}
			t.Logf("Redisson %s writes member format %s with a %d-byte random part", v, snap.MemberFormat, snap.MemberRandomLen)
			b, err := json.MarshalIndent(snap, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(SnapshotPath(v), append(b, '\n'), 0o644); err != nil {
				t.Fatal(err)
			}
		})
	}
}
