package main

import (
	"context"
	"encoding/hex"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/goredisson/ratelimiter"
	"github.com/goredisson/ratelimiter/wire"
)

// A limiter's whole state as inspect and watch read it, without changing
// anything.

// record is one decoded permit record.
type record struct {
	Time      time.Time `json:"time"`
	ScoreMS   int64     `json:"score_ms"`
	AgeMS     int64     `json:"age_ms"`
	Permits   uint32    `json:"permits"`
	RandomHex string    `json:"random_hex"`
	// RandomText is the decimal text of an Lc0I record's random part.
	RandomText string `json:"random_text,omitempty"`
	Format     string `json:"format"`
	// Writer is who wrote the record, read from its mark (wire.Member.Writer).
	Writer string `json:"writer,omitempty"`
	// Expired: past the interval (score <= now - interval) but still in
	// the set; the next acquisition or availablePermits releases it.
	Expired bool   `json:"expired"`
	Error   string `json:"error,omitempty"`
	RawHex  string `json:"raw_hex,omitempty"`

	score float64 // as Redis holds it
	size  int     // bytes
}

// budget is one value key and its permits key: the OVERALL pair, or one
// client's PER_CLIENT pair.
type budget struct {
	Scope          string   `json:"scope"` // "overall" or "client"
	ClientID       string   `json:"client_id,omitempty"`
	ValueKey       string   `json:"value_key"`
	Value          *int64   `json:"value"`               // nil: key absent or not an integer
	ValueRaw       string   `json:"value_raw,omitempty"` // a value that is not an integer
	ValueTTLMS     int64    `json:"value_ttl_ms"`
	PermitsKey     string   `json:"permits_key"`
	PermitsTTLMS   int64    `json:"permits_ttl_ms"`
	Records        []record `json:"records"`
	RecordsTotal   int      `json:"records_total"`
	InWindow       int64    `json:"permits_in_window"`
	RecordsWindow  int      `json:"records_in_window"`
	ExpiredPermits int64    `json:"expired_permits"`
	ExpiredRecords int      `json:"expired_records"`
	// Writers is the window's permits by writer, most first: who holds
	// the limiter (docs/fairness.md). Unreadable records count nowhere.
	Writers []writerShare `json:"writers"`
	// AvailableNow is what AvailablePermits would return now, computed
	// from the value and the records by the scripts' rules (wire.Settle)
	// without changing anything; nil when the limiter is not configured or
	// the budget is corrupt.
	AvailableNow *int64 `json:"available_now"`
	// Corrupt says why the scripts would fail on this budget with
	// "unexpected limiter state" (ErrCorruptState); empty when they would
	// not.
	Corrupt string `json:"corrupt,omitempty"`
	// Active: this budget belongs to the configured mode.
	Active bool `json:"active"`
}

type keyInfo struct {
	Role  string `json:"role"`
	Key   string `json:"key"`
	Type  string `json:"type"`
	TTLMS int64  `json:"ttl_ms"` // -1 none, -2 missing
}

type inspection struct {
	Name      string            `json:"name"`
	Now       time.Time         `json:"now"`
	Exists    bool              `json:"exists"`
	Config    *configJSON       `json:"config"`
	Fields    map[string]string `json:"config_fields"`
	ConfigKey string            `json:"config_key"`
	TTLMS     int64             `json:"ttl_ms"`
	Keys      []keyInfo         `json:"keys"`
	Budgets   []budget          `json:"budgets"`
	Clients   []string          `json:"per_client_ids"`
	Future    *futureRecords    `json:"future_of_server_clock,omitempty"` // future.go
	cfg       ratelimiter.Config
	cfgErr    error
}

// inspect reads everything about the limiter name, whose keys are k,
// without changing it. Its config hash is read once (HGETALL) and parsed
// by the scripts' rule; a config they refuse is in cfgErr, as
// Limiter.Config would return it.
func inspect(ctx context.Context, rdb redis.UniversalClient, name string, k wire.Keys) (*inspection, error) {
	now := time.Now()
	in := &inspection{Name: name, Now: now, ConfigKey: k.Config, Fields: map[string]string{}}

	fields, err := rdb.HGetAll(ctx, k.Config).Result()
	if err != nil {
		return nil, err
	}
	in.Fields = fields
	in.Exists = len(fields) > 0
	if in.Exists {
		cfg, err := parseConfig(name, k.Config, fields)
		if err != nil {
			in.cfgErr = err
		} else {
			in.cfg = cfg
			j := cfgJSON(name, cfg)
			in.Config = &j
		}
	}

	// PER_CLIENT keys of any client: K2 + ":" + id and K4 + ":" + id.
	clientSet := map[string]bool{}
	values, err := scanKeys(ctx, rdb, escapeGlob(k.Value)+":*", "string")
	if err != nil {
		return nil, err
	}
	permits, err := scanKeys(ctx, rdb, escapeGlob(k.Permits)+":*", "zset")
	if err != nil {
		return nil, err
	}
	for _, key := range values {
		clientSet[strings.TrimPrefix(key, k.Value+":")] = true
	}
	for _, key := range permits {
		clientSet[strings.TrimPrefix(key, k.Permits+":")] = true
	}
	for id := range clientSet {
		in.Clients = append(in.Clients, id)
	}
	sort.Strings(in.Clients)

	pairs := []budget{{Scope: "overall", ValueKey: k.Value, PermitsKey: k.Permits, Active: in.Config != nil && in.cfg.Mode == ratelimiter.Overall}}
	for _, id := range in.Clients {
		pairs = append(pairs, budget{Scope: "client", ClientID: id, ValueKey: k.Value + ":" + id, PermitsKey: k.Permits + ":" + id,
			Active: in.Config != nil && in.cfg.Mode == ratelimiter.PerClient})
	}

	// One pipeline for every key's TTL and type, the values and the records.
	type keyCmds struct {
		ttl *redis.DurationCmd
		typ *redis.StatusCmd
	}
	type budgetCmds struct {
		val  *redis.StringCmd
		recs *redis.ZSliceCmd
	}
	roles := []keyInfo{{Role: "config", Key: k.Config}}
	for _, b := range pairs {
		who := budgetName(b)
		roles = append(roles, keyInfo{Role: "value (" + who + ")", Key: b.ValueKey}, keyInfo{Role: "permits (" + who + ")", Key: b.PermitsKey})
	}
	kc := make([]keyCmds, len(roles))
	bc := make([]budgetCmds, len(pairs))
	replies, _ := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, r := range roles {
			kc[i] = keyCmds{p.PTTL(ctx, r.Key), p.Type(ctx, r.Key)}
		}
		for i, b := range pairs {
			bc[i] = budgetCmds{p.Get(ctx, b.ValueKey), p.ZRangeWithScores(ctx, b.PermitsKey, 0, -1)}
		}
		return nil
	})
	// A key of another type is state to report; a refused read fails.
	if err := readErr(true, replies...); err != nil {
		return nil, err
	}
	ttlOf := map[string]int64{}
	for i := range roles {
		d := kc[i].ttl.Val()
		ms := d.Milliseconds()
		if d < 0 {
			ms = int64(d)
		}
		roles[i].TTLMS, roles[i].Type = ms, kc[i].typ.Val()
		ttlOf[roles[i].Key] = ms
	}
	in.TTLMS = ttlOf[k.Config]
	in.Keys = roles

	for i := range pairs {
		b := &pairs[i]
		b.ValueTTLMS, b.PermitsTTLMS = ttlOf[b.ValueKey], ttlOf[b.PermitsKey]
		fillBudget(in, b, bc[i].val, bc[i].recs)
	}
	in.Budgets = pairs
	return in, nil
}

// fillBudget reads a budget's value and records from their replies and,
// on a configured limiter, works out what an acquisition would find or
// why the scripts would call the state corrupt.
func fillBudget(in *inspection, b *budget, val *redis.StringCmd, recs *redis.ZSliceCmd) {
	if s, err := val.Result(); err == nil {
		if v, ok := wire.ValueOf(s); ok {
			b.Value = &v
		} else {
			b.ValueRaw = s
			b.Corrupt = fmt.Sprintf("value %s is not a decimal integer in [-(2^53-1), 2^53-1]", strconv.Quote(s))
		}
	} else if isWrongType(err) {
		b.Corrupt = "the value key is not a string"
	}
	zs, err := recs.Result()
	if isWrongType(err) && b.Corrupt == "" {
		b.Corrupt = "the permits key is not a sorted set"
	}
	cutoff := in.Now.UnixMilli() - in.cfg.Interval.Milliseconds()
	for _, z := range zs {
		rec := decodeRecord(z, in.Now)
		rec.Expired = in.Config != nil && z.Score <= float64(cutoff)
		if rec.Expired {
			b.ExpiredPermits += int64(rec.Permits)
			b.ExpiredRecords++
		} else {
			b.InWindow += int64(rec.Permits)
			b.RecordsWindow++
		}
		b.Records = append(b.Records, rec)
	}
	b.RecordsTotal = len(b.Records)
	b.Writers = writerShares(b.Records)
	if in.Config == nil || b.Corrupt != "" {
		return
	}
	a := settled(in.cfg.Rate, b.Value, b.Records, cutoff)
	b.AvailableNow = &a
}

// decodeRecord decodes one permit record; one that fits no known format
// keeps its raw bytes and the count the scripts read from its last four.
func decodeRecord(z redis.Z, now time.Time) record {
	m, _ := z.Member.(string)
	score := int64(z.Score)
	rec := record{Time: time.UnixMilli(score), ScoreMS: score, AgeMS: now.UnixMilli() - score, score: z.Score, size: len(m)}
	dm, err := wire.Decode([]byte(m))
	if err != nil {
		rec.Error, rec.RawHex = err.Error(), hex.EncodeToString([]byte(m))
		rec.Permits = wire.ReadRecord(m, z.Score).Permits
		return rec
	}
	rec.Permits, rec.Format, rec.Writer = dm.Permits, dm.Format.String(), dm.Writer()
	rec.RandomHex = hex.EncodeToString(dm.Random)
	if dm.Format == wire.Lc0I {
		rec.RandomText = string(dm.Random)
	}
	return rec
}

func isWrongType(err error) bool {
	return err != nil && strings.HasPrefix(err.Error(), "WRONGTYPE")
}

// writerShare is what one writer holds of a window.
type writerShare struct {
	// Writer: "redisson" for an unmarked record (Redisson's, or a Go
	// client's of a version that did not mark), "go:" and the Client's
	// RecordTag for a tagged one, "go" for a marked one without a tag
	// (FormatFI).
	Writer  string `json:"writer"`
	Permits int64  `json:"permits"`
	Records int    `json:"records"`
}

// writerShares sums the in-window records by writer, most permits first
// (ties by name).
func writerShares(recs []record) []writerShare {
	at := map[string]int{}
	var out []writerShare
	for _, r := range recs {
		if r.Expired || r.Writer == "" {
			continue
		}
		i, ok := at[r.Writer]
		if !ok {
			i = len(out)
			at[r.Writer] = i
			out = append(out, writerShare{Writer: r.Writer})
		}
		out[i].Permits += int64(r.Permits)
		out[i].Records++
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Permits != out[j].Permits {
			return out[i].Permits > out[j].Permits
		}
		return out[i].Writer < out[j].Writer
	})
	return out
}

// sides sums writer shares into this library's ("go") and the others'
// ("redisson").
func sides(ws []writerShare) (goPermits, others int64) {
	for _, w := range ws {
		if w.Writer == "redisson" {
			others += w.Permits
		} else {
			goPermits += w.Permits
		}
	}
	return goPermits, others
}
