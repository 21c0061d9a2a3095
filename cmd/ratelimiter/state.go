package main

import (
	"context"
	"encoding/hex"
	"errors"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/goredisson/ratelimiter"
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
	// Expired: past the interval (score <= now - interval) but still in
	// the set; the next acquisition or availablePermits releases it.
	Expired bool   `json:"expired"`
	Error   string `json:"error,omitempty"`
	RawHex  string `json:"raw_hex,omitempty"`
}

// budget is one value key and its permits key: the OVERALL pair, or one
// client's PER_CLIENT pair.
type budget struct {
	Scope          string   `json:"scope"` // "overall" or "client"
	ClientID       string   `json:"client_id,omitempty"`
	ValueKey       string   `json:"value_key"`
	Value          *int64   `json:"value"` // nil: key absent
	ValueTTLMS     int64    `json:"value_ttl_ms"`
	PermitsKey     string   `json:"permits_key"`
	PermitsTTLMS   int64    `json:"permits_ttl_ms"`
	Records        []record `json:"records"`
	RecordsTotal   int      `json:"records_total"`
	InWindow       int64    `json:"permits_in_window"`
	RecordsWindow  int      `json:"records_in_window"`
	ExpiredPermits int64    `json:"expired_permits"`
	ExpiredRecords int      `json:"expired_records"`
	// AvailableNow is what an acquisition would find now, computed from
	// the value and the records by the protocol's rules without changing
	// anything; nil when the limiter is not configured.
	AvailableNow *int64 `json:"available_now"`
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
	cfg       ratelimiter.Config
	cfgErr    error
}

// inspect reads everything about the limiter without changing it.
func inspect(ctx context.Context, rdb redis.UniversalClient, lim *ratelimiter.Limiter) (*inspection, error) {
	k := lim.Keys()
	now := time.Now()
	in := &inspection{Name: lim.Name(), Now: now, ConfigKey: k.Config, Fields: map[string]string{}}

	fields, err := rdb.HGetAll(ctx, k.Config).Result()
	if err != nil {
		return nil, err
	}
	in.Fields = fields
	in.Exists = len(fields) > 0
	if in.Exists {
		cfg, err := lim.Config(ctx)
		if err != nil {
			in.cfgErr = err
		} else {
			in.cfg = cfg
			j := cfgJSON(lim.Name(), cfg)
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
		who := b.Scope
		if b.ClientID != "" {
			who = "client " + b.ClientID
		}
		roles = append(roles, keyInfo{Role: "value (" + who + ")", Key: b.ValueKey}, keyInfo{Role: "permits (" + who + ")", Key: b.PermitsKey})
	}
	kc := make([]keyCmds, len(roles))
	bc := make([]budgetCmds, len(pairs))
	_, err = rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, r := range roles {
			kc[i] = keyCmds{p.PTTL(ctx, r.Key), p.Type(ctx, r.Key)}
		}
		for i, b := range pairs {
			bc[i] = budgetCmds{p.Get(ctx, b.ValueKey), p.ZRangeWithScores(ctx, b.PermitsKey, 0, -1)}
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) && !strings.HasPrefix(err.Error(), "WRONGTYPE") {
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

	intervalMS := in.cfg.Interval.Milliseconds()
	for i := range pairs {
		b := &pairs[i]
		b.ValueTTLMS, b.PermitsTTLMS = ttlOf[b.ValueKey], ttlOf[b.PermitsKey]
		if s, err := bc[i].val.Result(); err == nil {
			if v, err := strconv.ParseInt(s, 10, 64); err == nil {
				b.Value = &v
			}
		}
		zs, _ := bc[i].recs.Result()
		for _, z := range zs {
			m, _ := z.Member.(string)
			score := int64(z.Score)
			rec := record{Time: time.UnixMilli(score), ScoreMS: score, AgeMS: now.UnixMilli() - score}
			dm, err := ratelimiter.DecodeMember([]byte(m))
			if err != nil {
				rec.Error, rec.RawHex = err.Error(), hex.EncodeToString([]byte(m))
				// The scripts still count the last four bytes.
				if len(m) >= 4 {
					b4 := []byte(m[len(m)-4:])
					rec.Permits = uint32(b4[0]) | uint32(b4[1])<<8 | uint32(b4[2])<<16 | uint32(b4[3])<<24
				}
			} else {
				rec.Permits, rec.Format = dm.Permits, dm.Format.String()
				rec.RandomHex = hex.EncodeToString(dm.Random)
				if dm.Format == ratelimiter.FormatLc0I {
					rec.RandomText = string(dm.Random)
				}
			}
			rec.Expired = in.Config != nil && score <= now.UnixMilli()-intervalMS
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
		if in.Config != nil {
			a := availableNow(in.cfg.Rate, b.Value, b.InWindow, b.ExpiredPermits)
			b.AvailableNow = &a
		}
	}
	in.Budgets = pairs
	return in, nil
}

// availableNow is what an acquisition would find (PROTOCOL.md tryAcquire
// step 3-4), computed without writing.
func availableNow(rate int64, value *int64, inWindow, released int64) int64 {
	if value == nil {
		return rate
	}
	v := *value
	if released > 0 {
		if v+released > rate {
			return rate - inWindow
		}
		return v + released
	}
	return v
}
