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

// Reading the limiters for the exporter, bounded: at most readLimits
// records of each budget are fetched, the counts come from ZCOUNT, and
// PER_CLIENT ids from a bounded SCAN. The budgets are read readBatch at a
// time: one pipeline counts their records, then pipelines of at most
// fetchRecords records (unless one budget alone needs more) fetch them,
// and only a few figures of each budget are kept. So memory grows with
// the limiters exported by a small amount each, not with the records
// read. "Now" is Redis's TIME, so the figures are those a client whose
// clock agrees with Redis would see.

// readLimits bound the reading of one limiter.
type readLimits struct {
	count      int64 // SCAN COUNT hint
	maxScans   int   // SCAN calls per pattern and master
	maxClients int   // PER_CLIENT ids read per limiter
	maxRecords int64 // records fetched per budget and query
}

const (
	// readBatch is the most budgets counted in one pipeline.
	readBatch = 256
	// fetchRecords is the most records fetched in one pipeline, unless
	// one budget alone needs more (at most wire.ExpireChunk and twice
	// --max-records and one).
	fetchRecords = 32768
)

// budgetState is what the exporter keeps of one budget.
type budgetState struct {
	client         string // "" for the OVERALL budget
	clientQuoted   bool   // needsQuoting(client)
	available      int64
	hasAvailable   bool // false: a state the scripts would refuse
	windowPermits  int64
	hasWindow      bool     // false: more records in the window than fetched
	windowSides    [2]int64 // of windowPermits: this library's (marked) records, the others'
	windowRecords  int64
	expiredRecords int64
	futureRecords  int64
	futureLead     time.Duration // of the newest record past Redis's clock
	newestMS       int64         // score of the newest record; 0: none
	// The reading's slice: the records stamped in [from, now) (see
	// readLimiters), and their permits when at most --max-records.
	sliceRecords    int64
	hasSlice        bool // false: no slice (the first reading), or a key of another type
	slicePermits    int64
	hasSlicePermits bool // false: no slice, or more records than --max-records
	// What the exporter has counted of the budget so far (exporter.count).
	records, permits int64
}

// limiterState is one limiter as read.
type limiterState struct {
	found
	quoted           bool          // needsQuoting(name)
	ttl              time.Duration // of the config key; < 0: none
	clientsFound     int           // PER_CLIENT ids found (at most maxClients)
	clientsTruncated bool
	budgets          []budgetState
}

// budgetCounts are the pipelined replies that count one budget's records.
type budgetCounts struct {
	value                        *redis.StringCmd
	first                        *redis.ZSliceCmd // the newest record
	nOld, nLive, nFuture, nSlice *redis.IntCmd    // nSlice nil: no slice
}

// budgetRecords are the pipelined replies that fetch them; a nil one was
// not asked for (no record to fetch).
type budgetRecords struct {
	old, live, slice *redis.ZSliceCmd
}

// readLimiters reads the limiters fs at Redis time nowMS. fromMS starts
// the reading's slice: the records stamped in [fromMS, nowMS) are counted
// (and their permits summed), for the exporter's counters; 0: no slice.
// A refused or failed read fails the whole reading; a key of another type
// is a state the scripts refuse, and its budget gets no available
// permits.
func readLimiters(ctx context.Context, rdb redis.UniversalClient, fs []found, nowMS, fromMS int64, lim readLimits) ([]limiterState, error) {
	out := make([]limiterState, len(fs))
	type queued struct {
		limiter, budget int
		valueKey        string
		permitsKey      string
	}
	var batch []queued
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		counts := make([]budgetCounts, len(batch))
		ttls := make([]*redis.DurationCmd, len(batch))
		replies, _ := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i, q := range batch {
				if q.budget == 0 {
					ttls[i] = p.PTTL(ctx, out[q.limiter].name)
				}
				cutoff := nowMS - out[q.limiter].cfg.Interval.Milliseconds()
				counts[i] = countBudget(ctx, p, q.valueKey, q.permitsKey, cutoff, nowMS, fromMS)
			}
			return nil
		})
		// A key of another type is state the scripts refuse, reported as
		// such; a refused read fails the reading.
		if err := readErr(true, replies...); err != nil {
			return err
		}
		for start := 0; start < len(batch); {
			end, total := start, int64(0)
			for end < len(batch) {
				n := toFetch(counts[end], lim.maxRecords)
				if end > start && total+n > fetchRecords {
					break
				}
				total += n
				end++
			}
			recs := make([]budgetRecords, end-start)
			if total > 0 {
				replies, _ := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
					for i := start; i < end; i++ {
						q := batch[i]
						cutoff := nowMS - out[q.limiter].cfg.Interval.Milliseconds()
						recs[i-start] = fetchBudget(ctx, p, q.permitsKey, counts[i], cutoff, nowMS, fromMS, lim.maxRecords)
					}
					return nil
				})
				if err := readErr(true, replies...); err != nil {
					return err
				}
			}
			for i := start; i < end; i++ {
				q := batch[i]
				l := &out[q.limiter]
				if ttls[i] != nil {
					l.ttl = ttls[i].Val()
				}
				cutoff := nowMS - l.cfg.Interval.Milliseconds()
				fillBudgetState(&l.budgets[q.budget], counts[i], recs[i-start], l.cfg, cutoff, nowMS, lim.maxRecords)
			}
			start = end
		}
		batch = batch[:0]
		return nil
	}
	for i, f := range fs {
		l := &out[i]
		l.found, l.quoted = f, needsQuoting(f.name)
		keys := wire.KeysFor(f.name, "") // f.name is the config key; no client's own pair is read
		if f.cfg.Mode != ratelimiter.PerClient {
			l.budgets = []budgetState{{}}
			batch = append(batch, queued{i, 0, keys.Value, keys.Permits})
		} else {
			ids, truncated, err := clientIDs(ctx, rdb, keys, lim)
			if err != nil {
				return nil, err
			}
			l.clientsFound, l.clientsTruncated = len(ids), truncated
			l.budgets = make([]budgetState, len(ids))
			if len(ids) == 0 {
				// No budget to read: the config's TTL on its own.
				ttl, err := rdb.PTTL(ctx, f.name).Result()
				if err != nil {
					return nil, err
				}
				l.ttl = ttl
			}
			for j, id := range ids {
				l.budgets[j].client, l.budgets[j].clientQuoted = id, needsQuoting(id)
				batch = append(batch, queued{i, j, keys.Value + ":" + id, keys.Permits + ":" + id})
			}
		}
		if len(batch) >= readBatch {
			if err := flush(); err != nil {
				return nil, err
			}
		}
	}
	if err := flush(); err != nil {
		return nil, err
	}
	return out, nil
}

// countBudget queues the commands that read a budget's value and count
// its records: past the interval (score <= cutoff), in the window, after
// Redis's clock, and in the slice [fromMS, nowMS) when fromMS > 0.
func countBudget(ctx context.Context, p redis.Pipeliner, valueKey, permitsKey string, cutoff, nowMS, fromMS int64) budgetCounts {
	c := strconv.FormatInt(cutoff, 10)
	now := strconv.FormatInt(nowMS, 10)
	b := budgetCounts{
		value:   p.Get(ctx, valueKey),
		first:   p.ZRevRangeWithScores(ctx, permitsKey, 0, 0),
		nOld:    p.ZCount(ctx, permitsKey, "-inf", c),
		nLive:   p.ZCount(ctx, permitsKey, "("+c, "+inf"),
		nFuture: p.ZCount(ctx, permitsKey, "("+now, "+inf"),
	}
	if fromMS > 0 {
		b.nSlice = p.ZCount(ctx, permitsKey, strconv.FormatInt(fromMS, 10), "("+now)
	}
	return b
}

// toFetch is how many records fetchBudget fetches for a budget counted
// as c.
func toFetch(c budgetCounts, maxRecords int64) int64 {
	if c.nOld.Err() != nil {
		return 0 // a key of another type: nothing to fetch
	}
	n := min(c.nOld.Val(), wire.ExpireChunk) + min(c.nLive.Val(), maxRecords)
	if c.nSlice != nil && c.nSlice.Val() <= maxRecords {
		n += c.nSlice.Val()
	}
	return n
}

// fetchBudget queues the commands that fetch a budget's records, as
// counted: the oldest past the interval (at most wire.ExpireChunk, what
// an acquisition releases), those in the window (at most maxRecords),
// and those of the slice [fromMS, nowMS) (when at most maxRecords).
func fetchBudget(ctx context.Context, p redis.Pipeliner, permitsKey string, c budgetCounts, cutoff, nowMS, fromMS, maxRecords int64) budgetRecords {
	var b budgetRecords
	if c.nOld.Err() != nil {
		return b
	}
	cs := strconv.FormatInt(cutoff, 10)
	if n := c.nOld.Val(); n > 0 {
		b.old = p.ZRangeByScoreWithScores(ctx, permitsKey, &redis.ZRangeBy{Min: "-inf", Max: cs, Count: min(n, wire.ExpireChunk)})
	}
	if n := c.nLive.Val(); n > 0 {
		b.live = p.ZRangeByScoreWithScores(ctx, permitsKey, &redis.ZRangeBy{Min: "(" + cs, Max: "+inf", Count: min(n, maxRecords)})
	}
	if c.nSlice != nil {
		if n := c.nSlice.Val(); n > 0 && n <= maxRecords {
			b.slice = p.ZRangeByScoreWithScores(ctx, permitsKey, &redis.ZRangeBy{
				Min: strconv.FormatInt(fromMS, 10), Max: "(" + strconv.FormatInt(nowMS, 10), Count: maxRecords + 1})
		}
	}
	return b
}

// zs returns c's records, none for a command not asked for.
func zs(c *redis.ZSliceCmd) []redis.Z {
	if c == nil {
		return nil
	}
	return c.Val()
}

// fillBudgetState reads a budget's replies. A budget the scripts would
// refuse (a value that is not an integer, keys of the wrong type, short
// records) gets no available permits.
func fillBudgetState(b *budgetState, c budgetCounts, r budgetRecords, cfg ratelimiter.Config, cutoff, nowMS, maxRecords int64) {
	corrupt := false
	var value *int64
	if s, err := c.value.Result(); err == nil {
		v, ok := wire.ValueOf(s)
		value, corrupt = &v, !ok
	} else if isWrongType(err) {
		corrupt = true
	}
	corrupt = corrupt || isWrongType(c.nOld.Err())
	b.expiredRecords, b.windowRecords, b.futureRecords = c.nOld.Val(), c.nLive.Val(), c.nFuture.Val()
	now := time.UnixMilli(nowMS)
	old, live := zs(r.old), zs(r.live)
	recs := make([]record, 0, len(old)+len(live))
	for _, z := range old {
		recs = append(recs, decodeRecord(z, now))
	}
	for _, z := range live {
		recs = append(recs, decodeRecord(z, now))
	}
	if int64(len(live)) == b.windowRecords {
		var sum int64
		for _, r := range recs[len(old):] {
			sum += int64(r.Permits)
		}
		b.windowPermits, b.hasWindow = sum, true
		b.windowSides[0], b.windowSides[1] = sides(writerShares(recs[len(old):]))
	}
	if !corrupt {
		b.available, b.hasAvailable = settled(cfg.Rate, value, recs, cutoff), true
	}
	if top := c.first.Val(); len(top) == 1 {
		b.newestMS = int64(top[0].Score)
		if top[0].Score > float64(nowMS) {
			b.futureLead = time.Duration((top[0].Score - float64(nowMS)) * float64(time.Millisecond))
		}
	}
	if c.nSlice != nil && c.nSlice.Err() == nil {
		b.sliceRecords, b.hasSlice = c.nSlice.Val(), true
		if b.sliceRecords <= maxRecords {
			var sum int64
			for _, z := range zs(r.slice) {
				sum += int64(decodeRecord(z, now).Permits)
			}
			b.slicePermits, b.hasSlicePermits = sum, true
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
