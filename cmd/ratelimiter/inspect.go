package main

import (
	"context"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/goredisson/ratelimiter"
)

func init() {
	adminCommand("inspect", "show config, TTLs, values and every permit record decoded (read-only)", "[--max-records N] [-o json]", inspectCmd)
	adminCommand("watch", "refresh available permits, grants per second and a bar every second until interrupted (read-only)",
		"[--every D] [--count N] [-o json]", watchCmd)
}

func table(w io.Writer) *tabwriter.Writer { return tabwriter.NewWriter(w, 0, 0, 2, ' ', 0) }

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

// escapeGlob makes s match itself in a SCAN MATCH pattern.
func escapeGlob(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[]\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// scanKeys returns the keys matching pattern of type typ, on every master
// of a cluster. It uses SCAN, never KEYS.
func scanKeys(ctx context.Context, rdb redis.UniversalClient, pattern, typ string) ([]string, error) {
	var mu sync.Mutex
	seen := map[string]bool{}
	scan := func(ctx context.Context, c redis.Cmdable) error {
		var cursor uint64
		for {
			keys, next, err := c.ScanType(ctx, cursor, pattern, 1000, typ).Result()
			if err != nil {
				return err
			}
			mu.Lock()
			for _, k := range keys {
				seen[k] = true
			}
			mu.Unlock()
			if cursor = next; cursor == 0 {
				return nil
			}
		}
	}
	var err error
	if cc, ok := rdb.(*redis.ClusterClient); ok {
		err = cc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error { return scan(ctx, m) })
	} else {
		err = scan(ctx, rdb)
	}
	out := make([]string, 0, len(seen))
	for k := range seen {
		out = append(out, k)
	}
	sort.Strings(out)
	return out, err
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

func ttlText(ms int64) string {
	switch ms {
	case -1:
		return "none"
	case -2:
		return "-"
	}
	return (time.Duration(ms) * time.Millisecond).String()
}

func inspectCmd(fs *flag.FlagSet) action {
	maxRecords := fs.Int("max-records", 1000, "list at most this many records per budget, newest last (0: all); totals always count all")
	return action{check: func(c *cli) error {
		if *maxRecords < 0 {
			return usagef("--max-records must not be negative")
		}
		return nil
	}, run: func(c *cli) error {
		in, err := inspect(c.ctx, c.rdb, c.lim)
		if err != nil {
			return err
		}
		for i := range in.Budgets {
			if b := &in.Budgets[i]; *maxRecords > 0 && len(b.Records) > *maxRecords {
				b.Records = b.Records[len(b.Records)-*maxRecords:]
			}
		}
		if err := c.emit(in, func(w io.Writer) { printInspection(w, in) }); err != nil {
			return err
		}
		if in.cfgErr != nil {
			return in.cfgErr
		}
		if !in.Exists && len(in.Clients) == 0 && !anyState(in) {
			return errRefused
		}
		return nil
	}}
}

func anyState(in *inspection) bool {
	for _, k := range in.Keys {
		if k.Type != "none" && k.Type != "" {
			return true
		}
	}
	return false
}

func printInspection(w io.Writer, in *inspection) {
	fmt.Fprintf(w, "limiter %s  (at %s)\n", in.Name, in.Now.Format(time.RFC3339Nano))
	switch {
	case in.Config != nil:
		fmt.Fprintf(w, "config   %s: %s; ttl %s\n", in.ConfigKey, describe(in.cfg), ttlText(in.TTLMS))
	case in.Exists:
		fmt.Fprintf(w, "config   %s: unreadable %v: %v\n", in.ConfigKey, in.Fields, in.cfgErr)
	default:
		fmt.Fprintf(w, "config   %s: absent (not configured)\n", in.ConfigKey)
	}
	fmt.Fprintln(w, "\nkeys")
	tw := table(w)
	fmt.Fprintln(tw, "  ROLE\tKEY\tTYPE\tTTL")
	for _, k := range in.Keys {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", k.Role, k.Key, k.Type, ttlText(k.TTLMS))
	}
	tw.Flush()
	if len(in.Clients) > 0 {
		fmt.Fprintf(w, "\nPER_CLIENT client ids found (SCAN): %s\n", strings.Join(in.Clients, ", "))
	} else {
		fmt.Fprintln(w, "\nPER_CLIENT client ids found (SCAN): none")
	}
	for _, b := range in.Budgets {
		if !b.Active && b.Value == nil && len(b.Records) == 0 && (b.Scope == "client" || in.Config != nil) {
			continue // no state of a mode the limiter is not in
		}
		who := "overall"
		if b.Scope == "client" {
			who = "client " + b.ClientID
		}
		mark := ""
		if b.Active {
			mark = " (active mode)"
		}
		val := "absent"
		if b.Value != nil {
			val = strconv.FormatInt(*b.Value, 10)
		}
		avail := "-"
		if b.AvailableNow != nil {
			avail = strconv.FormatInt(*b.AvailableNow, 10)
		}
		fmt.Fprintf(w, "\n%s%s\n  value %s = %s; available now %s\n", who, mark, b.ValueKey, val, avail)
		fmt.Fprintf(w, "  in window: %d permits in %d records; past the interval, not yet released: %d permits in %d records\n",
			b.InWindow, b.RecordsWindow, b.ExpiredPermits, b.ExpiredRecords)
		if len(b.Records) == 0 {
			continue
		}
		if len(b.Records) < b.RecordsTotal {
			fmt.Fprintf(w, "  showing the newest %d of %d records (--max-records)\n", len(b.Records), b.RecordsTotal)
		}
		tw := table(w)
		fmt.Fprintln(tw, "  TIME\tAGE\tPERMITS\tFORMAT\tRANDOM\tSTATE")
		for _, r := range b.Records {
			state := "in window"
			if r.Expired {
				state = "expired, not released"
			}
			format, random := r.Format, r.RandomHex
			if r.RandomText != "" {
				random += " (" + r.RandomText + ")"
			}
			if r.Error != "" {
				format, random = "?", r.RawHex
			}
			fmt.Fprintf(tw, "  %s\t%v\t%d\t%s\t%s\t%s\n", r.Time.Format("15:04:05.000"),
				time.Duration(r.AgeMS)*time.Millisecond, r.Permits, format, random, state)
		}
		tw.Flush()
	}
}

// activeBudget is the budget of the configured mode for this client.
func activeBudget(in *inspection, clientID string) *budget {
	for i := range in.Budgets {
		b := &in.Budgets[i]
		if in.cfg.Mode == ratelimiter.Overall && b.Scope == "overall" {
			return b
		}
		if in.cfg.Mode == ratelimiter.PerClient && b.Scope == "client" && b.ClientID == clientID {
			return b
		}
	}
	return nil
}

func watchCmd(fs *flag.FlagSet) action {
	every := fs.Duration("every", time.Second, "refresh period")
	count := fs.Int("count", 0, "stop after this many refreshes (0: until interrupted)")
	return action{
		check: func(c *cli) error {
			if *every < 10*time.Millisecond {
				return usagef("--every must be at least 10ms")
			}
			if *count < 0 {
				return usagef("--count must not be negative")
			}
			return nil
		},
		run: func(c *cli) error {
			tick := time.NewTicker(*every)
			defer tick.Stop()
			for i := 0; *count == 0 || i < *count; i++ {
				if i > 0 {
					select {
					case <-c.ctx.Done():
						return nil
					case <-tick.C:
					}
				}
				in, err := inspect(c.ctx, c.rdb, c.lim)
				if err != nil {
					if c.ctx.Err() != nil {
						return nil
					}
					return err
				}
				if err := c.emit(watchLine(in, c.client.ID()), func(w io.Writer) { printWatch(w, in, c.client.ID()) }); err != nil {
					return err
				}
			}
			return nil
		},
	}
}

type watchJSON struct {
	Time       time.Time `json:"time"`
	Name       string    `json:"name"`
	Exists     bool      `json:"exists"`
	Rate       int64     `json:"rate"`
	IntervalMS int64     `json:"interval_ms"`
	Available  *int64    `json:"available"`
	InWindow   int64     `json:"permits_in_window"`
	LastSecond int64     `json:"granted_last_second"`
	Clients    int       `json:"per_client_ids"`
}

func watchLine(in *inspection, clientID string) watchJSON {
	out := watchJSON{Time: in.Now, Name: in.Name, Exists: in.Config != nil, Clients: len(in.Clients)}
	if in.Config == nil {
		return out
	}
	out.Rate, out.IntervalMS = in.cfg.Rate, in.cfg.Interval.Milliseconds()
	sum := func(b *budget) {
		for _, r := range b.Records {
			if in.Now.UnixMilli()-r.ScoreMS < 1000 {
				out.LastSecond += int64(r.Permits)
			}
		}
	}
	if b := activeBudget(in, clientID); b != nil {
		out.Available, out.InWindow = b.AvailableNow, b.InWindow
	} else if in.cfg.Mode == ratelimiter.Overall {
		a := in.cfg.Rate // no state yet
		out.Available = &a
	} else {
		// PER_CLIENT without this client's budget: the window totals of
		// every client; available is per client, so unknown here.
		for _, b := range in.Budgets {
			if b.Active {
				out.InWindow += b.InWindow
			}
		}
	}
	// Grants per second count every client's records in PER_CLIENT mode.
	for i := range in.Budgets {
		if in.Budgets[i].Active {
			sum(&in.Budgets[i])
		}
	}
	return out
}

func printWatch(w io.Writer, in *inspection, clientID string) {
	l := watchLine(in, clientID)
	if !l.Exists {
		fmt.Fprintf(w, "%s  %s: not configured\n", l.Time.Format("15:04:05"), l.Name)
		return
	}
	avail := "-"
	if l.Available != nil {
		avail = strconv.FormatInt(*l.Available, 10)
	}
	fmt.Fprintf(w, "%s  available %6s/%d  in window %6d  granted/s %6d  %s\n",
		l.Time.Format("15:04:05"), avail, l.Rate, l.InWindow, l.LastSecond, meter(l.InWindow, l.Rate))
}

// meter draws the permits used in the window against the rate.
func meter(used, rate int64) string {
	const width = 30
	filled := 0
	if rate > 0 {
		filled = int(min(used, rate) * width / rate)
	}
	return "[" + strings.Repeat("#", filled) + strings.Repeat(".", width-filled) + "]"
}
