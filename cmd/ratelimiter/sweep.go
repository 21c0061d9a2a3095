package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
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

// swept is one limiter sweep reports: an idle one, or one it kept
// because it could not read or act on it.
type swept struct {
	Name string `json:"name"`
	Mode string `json:"mode"`
	// NewestMS is the Redis time of the newest record, any budget; 0
	// when the limiter has none.
	NewestMS int64  `json:"newest_record_ms"`
	IdleMS   int64  `json:"idle_ms"` // -1 when it has no record
	Keys     int    `json:"keys"`
	Action   string `json:"action"` // "none" (dry run), "ttl", "deleted", "skipped: why" or "kept: why"
	// Error is the read or write that failed, for a limiter kept because
	// of it; sweep then exits 2. Another skipped or kept limiter makes it
	// exit 1 (sweepShortfall).
	Error string `json:"error,omitempty"`
}

// runSweep is the sweep command.
func runSweep(argv []string, stdout, stderr io.Writer) int {
	var f sweepFlags
	cmd := standalone{name: "sweep", register: f.register, check: f.check,
		usage: "usage: ratelimiter sweep [--match PATTERN ...] [--idle 168h] [--apply [--ttl 24h | --delete]]\n\n" +
			"Lists limiters that have no TTL and no record newer than --idle (a dry run); --apply gives\n" +
			"each a TTL or deletes it, atomically with a re-check (a limiter used meanwhile is skipped).\n" +
			"Exit status: 0 all done; 1 not all done: an idle limiter skipped (used or given a TTL since\n" +
			"it was listed), a PER_CLIENT limiter kept because its client keys were not all found, or the\n" +
			"search stopped at --max-scans or --max-limiters; 2 a limiter it cannot read or act on (a\n" +
			"refused command, a lost connection), which it keeps, or a usage or connection error."}
	return cmd.run(argv, stdout, stderr, func(se session) int {
		listed, truncated, err := sweep(se.ctx, se.rdb, f)
		switch {
		case se.g.output == "json":
			enc := json.NewEncoder(stdout)
			for _, s := range listed {
				_ = enc.Encode(s)
			}
		case err == nil || len(listed) > 0:
			printSweep(stdout, listed, truncated, f)
		}
		if err != nil {
			return se.fail(2, "%s", redact(err.Error(), se.g.effectiveURL()))
		}
		if why := sweepShortfall(listed, truncated); why != "" {
			return se.fail(1, "not all done: %s", why)
		}
		return 0
	})
}

// sweepShortfall says what a sweep that met no error could not do of what
// it was asked, or "" when it did all: idle limiters skipped by --apply
// (used or given a TTL since they were listed), limiters kept because
// their client keys were not all found, limiters not examined (the search
// stopped at a bound).
func sweepShortfall(listed []swept, truncated bool) string {
	skipped, kept := 0, 0
	for _, s := range listed {
		switch {
		case strings.HasPrefix(s.Action, "skipped: "):
			skipped++
		case strings.HasPrefix(s.Action, "kept: "):
			kept++
		}
	}
	var why []string
	if skipped > 0 {
		why = append(why, fmt.Sprintf("%d idle %s skipped, used or given a TTL since listed (run sweep again)", skipped, plural(skipped, "limiter")))
	}
	if kept > 0 {
		why = append(why, fmt.Sprintf("%d %s kept, client keys not all found (raise --max-scans)", kept, plural(kept, "limiter")))
	}
	if truncated {
		why = append(why, "stopped at --max-scans or --max-limiters, some limiters not examined")
	}
	return strings.Join(why, "; ")
}

// sweep finds the idle limiters and, with --apply, acts on each. A
// limiter it cannot read, or on which its script fails, is listed as
// kept and sweep goes on to the next; the error it returns then says how
// many were kept so (the first error's text with it). An error that is
// not Redis's answer (the connection lost, the context done) stops it.
func sweep(ctx context.Context, rdb redis.UniversalClient, f sweepFlags) ([]swept, bool, error) {
	res, err := findLimiters(ctx, rdb, findLimits{patterns: f.match, count: 1000, maxScans: f.maxScans, maxLimiters: f.maxLimiters})
	if err != nil {
		return nil, false, err
	}
	var out []swept
	var first error
	kept := 0
	keep := func(l found, keys []string, err error) error {
		out = append(out, swept{Name: l.name, Mode: l.cfg.Mode.String(), IdleMS: -1, Keys: len(keys),
			Action: "kept: " + oneLine(err.Error()), Error: oneLine(err.Error())})
		kept++
		if first == nil {
			first = err
		}
		if !isReply(err) {
			return err
		}
		return nil
	}
	for _, l := range res.limiters {
		keys, complete, err := limiterKeys(ctx, rdb, l, f.maxScans)
		if err != nil {
			if err := keep(l, keys, err); err != nil {
				return out, res.truncated, err
			}
			continue
		}
		if !complete {
			// Some client's keys may be missing from keys: its records
			// could not be checked.
			out = append(out, swept{Name: l.name, Mode: l.cfg.Mode.String(), IdleMS: -1, Keys: len(keys),
				Action: "kept: its client keys were not all found (--max-scans)"})
			continue
		}
		s, idle, err := idleState(ctx, rdb, l, keys, f.idle)
		if err != nil {
			if err := keep(l, keys, err); err != nil {
				return out, res.truncated, err
			}
			continue
		}
		if !idle {
			continue
		}
		s.Action = "none"
		if f.apply {
			action, err := applySweep(ctx, rdb, keys, f)
			if err != nil {
				if err := keep(l, keys, err); err != nil {
					return out, res.truncated, err
				}
				continue
			}
			s.Action = action
		}
		out = append(out, s)
	}
	if kept > 0 {
		return out, res.truncated, fmt.Errorf("%d %s kept after a failed read or write (the first: %w)", kept, plural(kept, "limiter"), first)
	}
	return out, res.truncated, nil
}

// limiterKeys returns the keys of limiter l: its config, value and
// permits keys and, for a PER_CLIENT limiter, every client's pair found by
// a bounded SCAN (a SCAN walks the whole keyspace, so an OVERALL limiter,
// the common case, is not scanned; client keys left from an earlier
// PER_CLIENT configuration are not found). complete is false when the
// SCAN stopped at --max-scans.
func limiterKeys(ctx context.Context, rdb redis.Cmdable, l found, maxScans int) (keys []string, complete bool, err error) {
	k := wire.KeysFor(l.name, "") // l.name is the config key; clients' pairs are found by SCAN
	keys = []string{k.Config, k.Value, k.Permits}
	if l.cfg.Mode != ratelimiter.PerClient {
		return keys, true, nil
	}
	ids, truncated, err := clientIDs(ctx, rdb, k, readLimits{count: 1000, maxScans: maxScans, maxClients: 100000})
	if err != nil {
		return keys, false, err
	}
	for _, id := range ids {
		keys = append(keys, k.Value+":"+id, k.Permits+":"+id)
	}
	return keys, !truncated, nil
}

// idleState reads, in one pipeline, l's config TTL, the newest record of
// each of its permits keys (keys[2], keys[4], ...: limiterKeys' order)
// and then Redis's clock (TIME), and says whether l is idle: its config
// has no TTL, and no record is newer than that clock less idle. A record
// stamped after the clock (a writer whose clock leads Redis's) is newer:
// such a limiter is in use. Any error but a missing key (a refused
// command, a key of another type) fails the reading, and the caller keeps
// the limiter.
func idleState(ctx context.Context, rdb redis.Cmdable, l found, keys []string, idle time.Duration) (swept, bool, error) {
	s := swept{Name: l.name, Mode: l.cfg.Mode.String(), IdleMS: -1, Keys: len(keys)}
	var ttl *redis.DurationCmd
	var now *redis.TimeCmd
	var newest []*redis.ZSliceCmd
	cmds, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		ttl = p.PTTL(ctx, keys[0])
		for i := 2; i < len(keys); i += 2 {
			newest = append(newest, p.ZRevRangeWithScores(ctx, keys[i], 0, 0))
		}
		now = p.Time(ctx)
		return nil
	})
	if err := readErr(false, cmds...); err != nil {
		return s, false, err
	}
	if err != nil {
		return s, false, err
	}
	has := false
	for _, z := range newest {
		if v := z.Val(); len(v) == 1 && (!has || int64(v[0].Score) > s.NewestMS) {
			s.NewestMS, has = int64(v[0].Score), true
		}
	}
	nowMS := now.Val().UnixMilli()
	if has {
		s.IdleMS = nowMS - s.NewestMS // negative for a record stamped ahead
	}
	d := ttl.Val()
	noTTL := d == -1 || d == -1*time.Nanosecond
	return s, noTTL && (!has || s.NewestMS <= nowMS-idle.Milliseconds()), nil
}

// sweepScript gives a limiter's keys a TTL or deletes them, only when it
// is still idle, in one atomic step: it reads Redis's clock (TIME), the
// config's TTL (KEYS[1]) and the newest record of each permits key
// (KEYS[3], KEYS[5], ...), and acts on every key only when the config has
// no TTL and no record is newer than the clock less ARGV[1] ms; a record
// stamped after the clock is newer. ARGV[2] is "del" or "ttl", ARGV[3]
// the TTL in ms. It returns "done", "used" (a record is newer) or
// "changed" (the config got a TTL or is gone). A refused command fails
// the script before its first write: the reads come first, and every
// write is the same command.
var sweepScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local since = now - tonumber(ARGV[1])
if redis.call('PTTL', KEYS[1]) ~= -1 then
	return 'changed'
end
for i = 3, #KEYS, 2 do
	local top = redis.call('ZREVRANGE', KEYS[i], 0, 0, 'WITHSCORES')
	if top[2] ~= nil and tonumber(top[2]) > since then
		return 'used'
	end
end
for i = 1, #KEYS do
	if ARGV[2] == 'del' then
		redis.call('DEL', KEYS[i])
	else
		redis.call('PEXPIRE', KEYS[i], ARGV[3])
	end
end
return 'done'
`)

// applySweep gives l's keys a TTL or deletes them with sweepScript,
// which checks again that l is idle by Redis's clock, atomically with the
// writes: a limiter that got a record (by any clock, one stamped ahead of
// Redis's included) or a TTL since it was listed is skipped. On a
// PER_CLIENT limiter the client keys are those keys lists (found by SCAN
// just before). It returns the action done ("ttl", "deleted" or
// "skipped: why"), or the error of the script (the limiter was then left
// as it was).
func applySweep(ctx context.Context, rdb redis.UniversalClient, keys []string, f sweepFlags) (string, error) {
	op := "ttl"
	if f.del {
		op = "del"
	}
	res, err := sweepScript.Run(ctx, rdb, keys, f.idle.Milliseconds(), op, f.ttl.Milliseconds()).Text()
	switch {
	case err != nil && strings.Contains(err.Error(), "can't run this command"):
		// Redis does not name the command a script may not run.
		write := "pexpire"
		if f.del {
			write = "del"
		}
		return "", fmt.Errorf("%w (the script runs time, pttl, zrevrange and %s: ratelimiter doctor NAME says which this user may not run)", err, write)
	case err != nil:
		return "", err
	case res == "used":
		return "skipped: used meanwhile", nil
	case res == "changed":
		return "skipped: given a TTL or deleted meanwhile", nil
	case f.del:
		return "deleted", nil
	}
	return "ttl", nil
}

func printSweep(w io.Writer, idle []swept, truncated bool, f sweepFlags) {
	if len(idle) == 0 {
		fmt.Fprintf(w, "no idle limiters (no TTL and no record newer than %v)\n", f.idle)
	} else {
		tw := table(w)
		fmt.Fprintln(tw, "NAME\tMODE\tNEWEST RECORD\tKEYS\tACTION")
		for _, s := range idle {
			newest := "none"
			switch {
			case strings.HasPrefix(s.Action, "kept: "):
				newest = "?"
			case s.IdleMS >= 0:
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
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\n", shown(s.Name), s.Mode, newest, s.Keys, printable(action))
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
