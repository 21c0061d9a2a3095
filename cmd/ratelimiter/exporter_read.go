package main

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/goredisson/ratelimiter"
	"github.com/goredisson/ratelimiter/wire"
)

// Reading one limiter for the exporter, bounded: at most readLimits
// records of each budget are fetched, the counts come from ZCOUNT, and
// PER_CLIENT ids from a bounded SCAN. "Now" is Redis's TIME, so the
// figures are those a client whose clock agrees with Redis would see.

// readLimits bound the reading of one limiter.
type readLimits struct {
	count      int64 // SCAN COUNT hint
	maxScans   int   // SCAN calls per pattern and master
	maxClients int   // PER_CLIENT ids read per limiter
	maxRecords int64 // records fetched per budget and query
}

// budgetState is what the exporter reads of one budget.
type budgetState struct {
	client         string // "" for the OVERALL budget
	permitsKey     string
	available      *int64 // nil: a state the scripts would refuse
	windowRecords  int64
	windowPermits  *int64   // nil: more records in the window than fetched
	windowSides    [2]int64 // of windowPermits: this library's (marked) records, the others'
	expiredRecords int64
	futureRecords  int64
	futureLead     time.Duration // of the newest record past Redis's clock
	newestMS       int64         // score of the newest record; 0: none
	since          *int64        // permits in records stamped in (prev, now]; nil: no previous collection or too many
}

// limiterState is one limiter as read.
type limiterState struct {
	found
	ttl              time.Duration // of the config key; < 0: none
	clientsFound     int           // PER_CLIENT ids found (at most maxClients)
	clientsTruncated bool
	budgets          []budgetState
}

// budgetCmds are the pipelined replies of one budget.
type budgetCmds struct {
	value                   *redis.StringCmd
	old, live, since, first *redis.ZSliceCmd
	nOld, nLive, nFuture    *redis.IntCmd
}

// readLimiter reads f's budgets at Redis time nowMS. prev gives, per
// permits key, the Redis time of the previous collection.
func readLimiter(ctx context.Context, rdb redis.UniversalClient, f found, nowMS int64, prev map[string]int64, lim readLimits) (limiterState, error) {
	st := limiterState{found: f}
	keys := wire.KeysFor(f.name, "") // f.name is the config key; no client's own pair is read
	budgets := []budgetState{{permitsKey: keys.Permits}}
	valueKeys := []string{keys.Value}
	if f.cfg.Mode == ratelimiter.PerClient {
		ids, truncated, err := clientIDs(ctx, rdb, keys, lim)
		if err != nil {
			return st, err
		}
		st.clientsFound, st.clientsTruncated = len(ids), truncated
		budgets, valueKeys = nil, nil
		for _, id := range ids {
			budgets = append(budgets, budgetState{client: id, permitsKey: keys.Permits + ":" + id})
			valueKeys = append(valueKeys, keys.Value+":"+id)
		}
	}
	cutoff := nowMS - f.cfg.Interval.Milliseconds()
	cmds := make([]budgetCmds, len(budgets))
	var ttl *redis.DurationCmd
	_, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		ttl = p.PTTL(ctx, f.name)
		for i, b := range budgets {
			cmds[i] = queueBudget(ctx, p, valueKeys[i], b.permitsKey, cutoff, nowMS, prev[b.permitsKey], lim.maxRecords)
		}
		return nil
	})
	if err != nil && !isReply(err) {
		return st, err
	}
	st.ttl = ttl.Val()
	for i := range budgets {
		fillBudgetState(&budgets[i], cmds[i], f.cfg, cutoff, nowMS, lim.maxRecords)
	}
	st.budgets = budgets
	return st, nil
}

func queueBudget(ctx context.Context, p redis.Pipeliner, valueKey, permitsKey string, cutoff, nowMS, prevMS, maxRecords int64) budgetCmds {
	c := strconv.FormatInt(cutoff, 10)
	now := strconv.FormatInt(nowMS, 10)
	b := budgetCmds{
		value: p.Get(ctx, valueKey),
		old:   p.ZRangeByScoreWithScores(ctx, permitsKey, &redis.ZRangeBy{Min: "-inf", Max: c, Count: wire.ExpireChunk}),
		nOld:  p.ZCount(ctx, permitsKey, "-inf", c),
		live:  p.ZRangeByScoreWithScores(ctx, permitsKey, &redis.ZRangeBy{Min: "(" + c, Max: "+inf", Count: maxRecords}),
		nLive: p.ZCount(ctx, permitsKey, "("+c, "+inf"),
		// The newest record, for the lead of one stamped past Redis's clock.
		first:   p.ZRevRangeWithScores(ctx, permitsKey, 0, 0),
		nFuture: p.ZCount(ctx, permitsKey, "("+now, "+inf"),
	}
	if prevMS > 0 && prevMS < nowMS {
		b.since = p.ZRangeByScoreWithScores(ctx, permitsKey, &redis.ZRangeBy{
			Min: "(" + strconv.FormatInt(prevMS, 10), Max: now, Count: maxRecords + 1})
	}
	return b
}

// fillBudgetState reads a budget's replies. A budget the scripts would
// refuse (a value that is not an integer, keys of the wrong type, short
// records) gets no available permits.
func fillBudgetState(b *budgetState, c budgetCmds, cfg ratelimiter.Config, cutoff, nowMS, maxRecords int64) {
	corrupt := false
	var value *int64
	if s, err := c.value.Result(); err == nil {
		v, ok := wire.ValueOf(s)
		value, corrupt = &v, !ok
	} else if isWrongType(err) {
		corrupt = true
	}
	old, errOld := c.old.Result()
	live, errLive := c.live.Result()
	corrupt = corrupt || isWrongType(errOld) || isWrongType(errLive)
	b.expiredRecords, b.windowRecords, b.futureRecords = c.nOld.Val(), c.nLive.Val(), c.nFuture.Val()
	now := time.UnixMilli(nowMS)
	recs := make([]record, 0, len(old)+len(live))
	for _, z := range append(old, live...) {
		recs = append(recs, decodeRecord(z, now))
	}
	if int64(len(live)) == b.windowRecords {
		var sum int64
		for _, r := range recs[len(old):] {
			sum += int64(r.Permits)
		}
		b.windowPermits = &sum
		b.windowSides[0], b.windowSides[1] = sides(writerShares(recs[len(old):]))
	}
	if !corrupt {
		a := settled(cfg.Rate, value, recs, cutoff)
		b.available = &a
	}
	if top := c.first.Val(); len(top) == 1 {
		b.newestMS = int64(top[0].Score)
	}
	if top := c.first.Val(); len(top) == 1 && top[0].Score > float64(nowMS) {
		b.futureLead = time.Duration((top[0].Score - float64(nowMS)) * float64(time.Millisecond))
	}
	if c.since != nil {
		if zs, err := c.since.Result(); err == nil && int64(len(zs)) <= maxRecords {
			var sum int64
			for _, z := range zs {
				sum += int64(decodeRecord(z, now).Permits)
			}
			b.since = &sum
		}
	}
}

// clientIDs returns the ids of the PER_CLIENT budgets of the limiter
// whose keys are k, from a bounded SCAN of its value and permits keys.
func clientIDs(ctx context.Context, rdb redis.Cmdable, k wire.Keys, lim readLimits) ([]string, bool, error) {
	ids := map[string]bool{}
	truncated := false
	for _, q := range []struct{ base, typ string }{{k.Permits, "zset"}, {k.Value, "string"}} {
		keys, t, err := scanBounded(ctx, rdb, []string{escapeGlob(q.base) + ":*"}, q.typ, lim.count, lim.maxScans)
		if err != nil {
			return nil, false, err
		}
		truncated = truncated || t
		for _, key := range keys {
			ids[strings.TrimPrefix(key, q.base+":")] = true
		}
	}
	out := make([]string, 0, len(ids))
	for id := range ids {
		out = append(out, id)
	}
	sortStrings(out)
	if len(out) > lim.maxClients {
		out, truncated = out[:lim.maxClients], true
	}
	return out, truncated, nil
}
