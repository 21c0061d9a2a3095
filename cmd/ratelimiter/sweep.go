package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/goredisson/ratelimiter"
	"github.com/goredisson/ratelimiter/wire"
)

func init() {
	commands["sweep"] = command{"find limiters, Go's or Java's, with no TTL and no record newer than --idle; " +
		"with --apply give them a TTL (--ttl) or delete them (--delete)", runSweep}
}

// sweepFlags are sweep's own flags.
type sweepFlags struct {
	match       []string
	idle        time.Duration
	apply       bool
	ttl         time.Duration
	del         bool
	maxScans    int
	maxLimiters int
}

func (f *sweepFlags) register(fs *flag.FlagSet) {
	fs.Func("match", "SCAN MATCH pattern for limiter names (config keys); repeat for several (default *)", func(s string) error {
		if s == "" {
			return errors.New("empty pattern")
		}
		f.match = append(f.match, s)
		return nil
	})
	fs.DurationVar(&f.idle, "idle", 7*24*time.Hour, "a limiter is idle when its newest record (any client's) is older than this, or it has none")
	fs.BoolVar(&f.apply, "apply", false, "act on the idle limiters; without it, only list them (dry run)")
	fs.DurationVar(&f.ttl, "ttl", 24*time.Hour, "with --apply: the TTL to give every key of an idle limiter")
	fs.BoolVar(&f.del, "delete", false, "delete the idle limiters' keys instead of giving them a TTL (with --apply; without it, say so)")
	fs.IntVar(&f.maxScans, "max-scans", 1000, "most SCAN calls per pattern (and cluster master)")
	fs.IntVar(&f.maxLimiters, "max-limiters", 10000, "most limiters examined, in name order")
}

func (f *sweepFlags) check() error {
	switch {
	case f.idle <= 0:
		return usagef("--idle must be positive")
	case f.ttl < time.Millisecond:
		return usagef("--ttl must be at least 1ms")
	case f.maxScans < 1 || f.maxLimiters < 1:
		return usagef("--max-scans and --max-limiters must be at least 1")
	}
	if len(f.match) == 0 {
		f.match = []string{"*"}
	}
	return nil
}

// swept is one idle limiter, as sweep reports it.
type swept struct {
	Name string `json:"name"`
	Mode string `json:"mode"`
	// NewestMS is the Redis time of the newest record, any budget; 0
	// when the limiter has none.
	NewestMS int64  `json:"newest_record_ms"`
	IdleMS   int64  `json:"idle_ms"` // -1 when it has no record
	Keys     int    `json:"keys"`
	Action   string `json:"action"` // "none" (dry run), "ttl", "deleted", or "skipped: why"
}

// runSweep is the sweep command.
func runSweep(argv []string, stdout, stderr io.Writer) int {
	var f sweepFlags
	cmd := standalone{name: "sweep", register: f.register, check: f.check,
		usage: "usage: ratelimiter sweep [--match PATTERN ...] [--idle 168h] [--apply [--ttl 24h | --delete]]\n\n" +
			"Lists limiters that have no TTL and no record newer than --idle (a dry run); --apply gives\n" +
			"each a TTL or deletes it, atomically with a re-check (a limiter used meanwhile is skipped)."}
	return cmd.run(argv, stdout, stderr, func(se session) int {
		idle, truncated, err := sweep(se.ctx, se.rdb, f)
		if err != nil {
			return se.fail(2, "%s", redact(err.Error(), se.g.effectiveURL()))
		}
		if se.g.output == "json" {
			enc := json.NewEncoder(stdout)
			for _, s := range idle {
				_ = enc.Encode(s)
			}
		} else {
			printSweep(stdout, idle, truncated, f)
		}
		return 0
	})
}

// sweep finds the idle limiters and, with --apply, acts on each.
func sweep(ctx context.Context, rdb redis.UniversalClient, f sweepFlags) ([]swept, bool, error) {
	t, err := rdb.Time(ctx).Result()
	if err != nil {
		return nil, false, err
	}
	now := t.UnixMilli()
	res, err := findLimiters(ctx, rdb, findLimits{patterns: f.match, count: 1000, maxScans: f.maxScans, maxLimiters: f.maxLimiters})
	if err != nil {
		return nil, false, err
	}
	var out []swept
	for _, l := range res.limiters {
		keys, err := limiterKeys(ctx, rdb, l, f.maxScans)
		if err != nil {
			return out, res.truncated, err
		}
		s, idle, err := idleState(ctx, rdb, l, keys, now, f.idle)
		if err != nil || !idle {
			if err != nil {
				return out, res.truncated, err
			}
			continue
		}
		s.Action = "none"
		if f.apply {
			s.Action = applySweep(ctx, rdb, l, keys, now, f)
		}
		out = append(out, s)
	}
	return out, res.truncated, nil
}

// limiterKeys returns the keys of limiter l: its config, value and
// permits keys and, for a PER_CLIENT limiter, every client's pair found by
// a bounded SCAN (a SCAN walks the whole keyspace, so an OVERALL limiter,
// the common case, is not scanned; client keys left from an earlier
// PER_CLIENT configuration are not found).
func limiterKeys(ctx context.Context, rdb redis.UniversalClient, l found, maxScans int) ([]string, error) {
	k := wire.KeysFor(l.name, "") // l.name is the config key; clients' pairs are found by SCAN
	keys := []string{k.Config, k.Value, k.Permits}
	if l.cfg.Mode != ratelimiter.PerClient {
		return keys, nil
	}
	ids, _, err := clientIDs(ctx, rdb, k, readLimits{count: 1000, maxScans: maxScans, maxClients: 100000})
	if err != nil {
		return nil, err
	}
	for _, id := range ids {
		keys = append(keys, k.Value+":"+id, k.Permits+":"+id)
	}
	return keys, nil
}

// idleState reads l's config TTL and newest record over its permits keys
// (keys[2], keys[4], ...: limiterKeys' order) and says
// whether l is idle: no TTL on its config, no record newer than idle.
func idleState(ctx context.Context, rdb redis.Cmdable, l found, keys []string, now int64, idle time.Duration) (swept, bool, error) {
	s := swept{Name: l.name, Mode: l.cfg.Mode.String(), IdleMS: -1}
	var ttl *redis.DurationCmd
	var newest []*redis.ZSliceCmd
	_, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		ttl = p.PTTL(ctx, keys[0])
		for i := 2; i < len(keys); i += 2 {
			newest = append(newest, p.ZRevRangeWithScores(ctx, keys[i], 0, 0))
		}
		return nil
	})
	if err != nil && !isReply(err) {
		return s, false, err
	}
	for _, z := range newest {
		if v := z.Val(); len(v) == 1 && int64(v[0].Score) > s.NewestMS {
			s.NewestMS = int64(v[0].Score)
		}
	}
	if s.NewestMS > 0 {
		s.IdleMS = now - s.NewestMS
	}
	s.Keys = len(keys)
	d := ttl.Val()
	noTTL := d == -1 || d == -1*time.Nanosecond
	return s, noTTL && (s.IdleMS < 0 || s.IdleMS > idle.Milliseconds()), nil
}

// applySweep gives l's keys a TTL or deletes them, in one transaction
// that WATCHes them and checks again that l is idle: a limiter that got a
// record or a TTL meanwhile is skipped.
func applySweep(ctx context.Context, rdb redis.UniversalClient, l found, keys []string, now int64, f sweepFlags) string {
	action := "ttl"
	err := rdb.Watch(ctx, func(tx *redis.Tx) error {
		_, idle, err := idleState(ctx, tx, l, keys, now, f.idle)
		if err != nil {
			return err
		}
		if !idle {
			action = "skipped: used meanwhile"
			return nil
		}
		_, err = tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
			for _, k := range keys {
				if f.del {
					p.Del(ctx, k)
				} else {
					p.PExpire(ctx, k, f.ttl)
				}
			}
			return nil
		})
		return err
	}, keys...)
	switch {
	case errors.Is(err, redis.TxFailedErr):
		return "skipped: used meanwhile"
	case err != nil:
		return "skipped: " + oneLine(err.Error())
	case action == "ttl" && f.del:
		return "deleted"
	}
	return action
}

func printSweep(w io.Writer, idle []swept, truncated bool, f sweepFlags) {
	if len(idle) == 0 {
		fmt.Fprintf(w, "no idle limiters (no TTL and no record newer than %v)\n", f.idle)
	} else {
		tw := table(w)
		fmt.Fprintln(tw, "NAME\tMODE\tNEWEST RECORD\tKEYS\tACTION")
		for _, s := range idle {
			newest := "none"
			if s.IdleMS >= 0 {
				newest = wire.Millis(s.IdleMS).Round(time.Second).String() + " ago"
			}
			action := s.Action
			switch {
			case action == "none" && f.del:
				action = "would delete"
			case action == "none":
				action = "would set TTL " + f.ttl.String()
			case action == "ttl":
				action = "TTL " + f.ttl.String()
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\n", shown(s.Name), s.Mode, newest, s.Keys, action)
		}
		tw.Flush()
	}
	if truncated {
		fmt.Fprintln(w, "(stopped at --max-scans or --max-limiters: some limiters were not examined)")
	}
	if !f.apply && len(idle) > 0 {
		fmt.Fprintln(w, "dry run: add --apply to act")
	}
}
