package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/goredisson/ratelimiter"
	"github.com/goredisson/ratelimiter/wire"
)

// plan and apply: limits as code (docs/limits-as-code.md). plan compares a
// limits file with the limiters in Redis, Go's and Java Redisson's alike
// (both write the same config hash); apply makes Redis match it.
//
// Exit status of plan (and apply --dry-run): 0 Redis matches the file, 3
// there are changes to apply, 1 some limiter cannot be planned (its
// config is corrupt or not a hash, or a pattern's scan stopped at a
// bound), 2 usage, file or connection error. apply: 0 Redis now matches,
// 1 some limiter was left as it was (reported), 2 usage, file or
// connection error; bad input is refused before anything is sent.

// exitDrift is plan's exit status when Redis differs from the file.
const exitDrift = 3

func init() {
	commands["plan"] = command{"compare a limits file (--file limits.yaml) with the limiters in Redis; " +
		"exit 0 no drift, 3 changes to apply, 1 problems, 2 errors", func(argv []string, stdout, stderr io.Writer) int {
		return runPlan(argv, stdout, stderr, false)
	}}
	commands["apply"] = command{"make the limiters in Redis match a limits file (--file limits.yaml): create " +
		"the missing, change the others keeping their state; --dry-run is plan", func(argv []string, stdout, stderr io.Writer) int {
		return runPlan(argv, stdout, stderr, true)
	}}
}

// planFlags are plan's and apply's own flags.
type planFlags struct {
	file        string
	dryRun      bool
	maxScans    int
	maxLimiters int
	limits      *limitsFile // read by check
}

func (f *planFlags) register(fs *flag.FlagSet, apply bool) {
	fs.StringVar(&f.file, "f", "", "the limits file, YAML (docs/limits-as-code.md); - reads standard input (required)")
	fs.StringVar(&f.file, "file", "", "same as --f")
	if apply {
		fs.BoolVar(&f.dryRun, "dry-run", false, "only show what apply would do, as plan does (same exit status)")
	}
	fs.IntVar(&f.maxScans, "max-scans", 1000, "most SCAN calls per match pattern (and cluster master)")
	fs.IntVar(&f.maxLimiters, "max-limiters", 10000, "most limiters that one match pattern may cover")
}

// check reads and checks the file: every bad input fails here, before
// any connection.
func (f *planFlags) check() error {
	switch {
	case f.file == "":
		return usagef("--file FILE is required (the limits file; - for standard input)")
	case f.maxScans < 1 || f.maxLimiters < 1:
		return usagef("--max-scans and --max-limiters must be at least 1")
	}
	l, err := readLimitsFile(f.file, os.Stdin)
	if err != nil {
		return err
	}
	f.limits = l
	return nil
}

// fieldChange is one field that apply changes.
type fieldChange struct {
	Field string `json:"field"` // mode, rate, interval or keep_alive
	Old   string `json:"old"`
	New   string `json:"new"`
}

// planItem is one limiter of a plan.
type planItem struct {
	Name string `json:"name"`
	// Source is the entry that asks for it: its name, or match=PATTERN.
	Source string `json:"source"`
	Line   int    `json:"line"`
	// Action is create, change, unchanged or problem.
	Action  string        `json:"action"`
	Changes []fieldChange `json:"changes,omitempty"`
	// Config is what the file asks for.
	Config limitJSON `json:"config"`
	// Current is what Redis holds, when readable.
	Current *limitJSON `json:"current,omitempty"`
	// Problem says why the limiter is left alone (action problem, or a
	// failed apply).
	Problem string `json:"problem,omitempty"`
	// Warning says that another limiter shares this one's value and
	// permits keys: one configured in Redis, or one of this file.
	Warning string `json:"warning,omitempty"`
	// Result is what apply did: created, changed, unchanged or skipped.
	Result string `json:"result,omitempty"`

	want ratelimiter.Config
}

// limitJSON is a configuration in plan's JSON: keep_alive_ms 0 is none.
type limitJSON struct {
	Mode        string `json:"mode"`
	Rate        int64  `json:"rate"`
	IntervalMS  int64  `json:"interval_ms"`
	KeepAliveMS int64  `json:"keep_alive_ms"`
}

func limitOf(cfg ratelimiter.Config) limitJSON {
	return limitJSON{Mode: cfg.Mode.String(), Rate: cfg.Rate, IntervalMS: cfg.Interval.Milliseconds(), KeepAliveMS: cfg.KeepAlive.Milliseconds()}
}

// patternReport is what one match pattern covered.
type patternReport struct {
	Match   string `json:"match"`
	Line    int    `json:"line"`
	Matched int    `json:"matched"`
	// Truncated: the scan stopped at --max-scans or --max-limiters, so
	// limiters past it were not examined (a problem).
	Truncated bool `json:"truncated,omitempty"`
}

// planSummary counts a plan's items by action.
type planSummary struct {
	Create    int `json:"create"`
	Change    int `json:"change"`
	Unchanged int `json:"unchanged"`
	Problems  int `json:"problems"`
	// Created and Changed count what apply did (0 in a plan).
	Created int `json:"created"`
	Changed int `json:"changed"`
}

// plan is the whole comparison, as -o json prints it.
type plan struct {
	File     string          `json:"file"`
	Applied  bool            `json:"applied"`
	Limiters []*planItem     `json:"limiters"`
	Patterns []patternReport `json:"patterns"`
	Summary  planSummary     `json:"summary"`
}

func runPlan(argv []string, stdout, stderr io.Writer, apply bool) int {
	var f planFlags
	name, usage := "plan", "usage: ratelimiter plan --file limits.yaml [--max-scans N] [--max-limiters N] [--output json]\n\n"+
		"Compares the limits file with the limiters in Redis (Go's or Java Redisson's) and shows what\n"+
		"apply would create and change; writes nothing. Exit status: 0 Redis matches the file, 3 there\n"+
		"are changes to apply (a drift check for CI), 1 some limiter cannot be planned (corrupt config,\n"+
		"a key that is not a hash, a scan stopped at a bound), 2 usage, file or connection error."
	if apply {
		name, usage = "apply", "usage: ratelimiter apply --file limits.yaml [--dry-run] [--max-scans N] [--max-limiters N] [--output json]\n\n"+
			"Makes the limiters in Redis match the limits file: creates the missing ones (as try-set-rate) and\n"+
			"changes the others keeping the permits taken in the current window (as update-rate --keep-state).\n"+
			"A limiter whose config is corrupt or not a hash is reported and left alone. Exit status: 0 Redis\n"+
			"matches the file, 1 some limiter was left alone, 2 usage, file or connection error (nothing\n"+
			"written on bad input). --dry-run prints the plan and exits as plan does."
	}
	cmd := standalone{name: name, register: func(fs *flag.FlagSet) { f.register(fs, apply) }, check: f.check, usage: usage}
	return cmd.run(argv, stdout, stderr, func(se session) int {
		client := ratelimiter.NewClient(se.rdb, se.g.clientOptions()...)
		p, err := makePlan(se.ctx, se.rdb, se.g, f)
		if err != nil {
			var ue usageError
			if errors.As(err, &ue) {
				return se.fail(2, "%s", err)
			}
			return se.fail(2, "%s", redact(err.Error(), se.g.effectiveURL()))
		}
		// Warnings first: apply writes after them.
		for _, it := range p.Limiters {
			if it.Warning != "" {
				fmt.Fprintf(stderr, "ratelimiter %s: warning: %s: %s\n", name, shown(it.Name), printable(it.Warning))
			}
		}
		var fatal error
		if apply && !f.dryRun {
			fatal = applyPlan(se.ctx, client, p, se.g.clientID != "")
		}
		if se.g.output == "json" {
			_ = json.NewEncoder(stdout).Encode(p)
		} else {
			printPlan(stdout, p)
		}
		switch {
		case fatal != nil:
			return se.fail(2, "%s (the table shows what was done before)", redact(fatal.Error(), se.g.effectiveURL()))
		case p.Summary.Problems > 0:
			return 1
		case !p.Applied && p.Summary.Create+p.Summary.Change > 0:
			return exitDrift
		}
		return 0
	})
}

// makePlan reads what Redis holds for every name of the file and every
// existing limiter its patterns match, and compares.
func makePlan(ctx context.Context, rdb redis.UniversalClient, g *globals, f planFlags) (*plan, error) {
	prefix := g.prefix
	p := &plan{File: f.limits.path, Limiters: []*planItem{}, Patterns: []patternReport{}}
	// The limiters to read: explicit names first, then what the patterns
	// match (an explicit name wins over any pattern).
	wanted := map[string]*planItem{}
	var order []string
	for _, e := range f.limits.entries {
		if e.name != "" {
			wanted[e.name] = &planItem{Name: e.name, Source: e.source(), Line: e.line, want: e.cfg, Config: limitOf(e.cfg)}
			order = append(order, e.name)
		}
	}
	matchedBy := map[string][]limitEntry{} // pattern-matched names, by the entries matching them
	for _, e := range f.limits.entries {
		if e.match == "" {
			continue
		}
		keys, truncated, err := scanBounded(ctx, rdb, []string{escapeGlob(prefix) + e.match}, "hash", 1000, f.maxScans)
		if err != nil {
			return nil, err
		}
		if len(keys) > f.maxLimiters {
			keys, truncated = keys[:f.maxLimiters], true
		}
		for _, k := range keys {
			name, ok := strings.CutPrefix(k, prefix)
			if !ok {
				continue
			}
			if _, explicit := wanted[name]; !explicit {
				matchedBy[name] = append(matchedBy[name], e)
			}
		}
		p.Patterns = append(p.Patterns, patternReport{Match: e.match, Line: e.line, Truncated: truncated})
	}
	for name := range matchedBy {
		order = append(order, name)
	}
	sort.Strings(order)

	// One pipeline: every config hash.
	cmds := make([]*redis.MapStringStringCmd, len(order))
	_, err := rdb.Pipelined(ctx, func(pl redis.Pipeliner) error {
		for i, name := range order {
			cmds[i] = pl.HGetAll(ctx, g.mapName(name))
		}
		return nil
	})
	if err != nil && !isReply(err) {
		return nil, err
	}
	for i, name := range order {
		h, err := cmds[i].Result()
		if err != nil && !isWrongType(err) {
			return nil, err
		}
		it := wanted[name]
		if it == nil {
			// Matched by patterns only: a hash without any config field is
			// some other hash, not a limiter.
			if !isWrongType(err) && !anyConfigField(h) {
				continue
			}
			var perr error
			if it, perr = fromPatterns(name, matchedBy[name]); perr != nil {
				return nil, perr
			}
			for j, pr := range p.Patterns {
				for _, e := range matchedBy[name] {
					if e.match == pr.Match {
						p.Patterns[j].Matched++
					}
				}
			}
		}
		key := g.mapName(name)
		switch {
		case isWrongType(err):
			typ, terr := rdb.Type(ctx, key).Result()
			if terr != nil {
				return nil, terr
			}
			it.Action, it.Problem = "problem", fmt.Sprintf("its config key %s is a %s, not a hash: left alone", shown(key), typ)
		case len(h) == 0:
			it.Action = "create"
		default:
			cfg, cerr := parseConfig(name, key, h)
			if cerr != nil {
				it.Action, it.Problem = "problem", "corrupt config: "+configReason(cerr)+": left alone"
				break
			}
			cur := limitOf(cfg)
			it.Current = &cur
			it.Changes = diffConfig(cfg, it.want)
			it.Action = "unchanged"
			if len(it.Changes) > 0 {
				it.Action = "change"
			}
		}
		p.Limiters = append(p.Limiters, it)
	}
	if err := warnSharedKeys(ctx, rdb, g, p); err != nil {
		return nil, err
	}
	p.count()
	return p, nil
}

// warnSharedKeys sets the Warning of each limiter to create or change
// whose value and permits keys another limiter shares: one of the file's
// (to create or change too), or one configured in Redis (shared.go).
func warnSharedKeys(ctx context.Context, rdb redis.Cmdable, g *globals, p *plan) error {
	inFile := map[string]bool{}
	var keys []string
	var items []*planItem
	for _, it := range p.Limiters {
		if it.Action == "create" || it.Action == "change" {
			inFile[g.mapName(it.Name)] = true
			keys = append(keys, g.mapName(it.Name))
			items = append(items, it)
		}
	}
	others, err := configuredOthers(ctx, rdb, keys)
	if err != nil {
		return err
	}
	for i, it := range items {
		other, ok := sharesKeysWith(keys[i])
		switch {
		case ok && inFile[other]:
			it.Warning = sharedKeysWarning(keys[i], other) + "; both are in this file"
		case others[i] != "":
			it.Warning = sharedKeysWarning(keys[i], others[i])
		}
	}
	return nil
}

// count fills the summary from the items and the patterns.
func (p *plan) count() {
	s := planSummary{}
	for _, pr := range p.Patterns {
		if pr.Truncated {
			s.Problems++
		}
	}
	for _, it := range p.Limiters {
		switch {
		case it.Problem != "":
			s.Problems++
		case it.Action == "create":
			s.Create++
		case it.Action == "change":
			s.Change++
		default:
			s.Unchanged++
		}
		switch it.Result {
		case "created":
			s.Created++
		case "changed":
			s.Changed++
		}
	}
	p.Summary = s
}

// fromPatterns makes the item of a limiter that only patterns match; two
// patterns asking for different limits are an error of the file.
func fromPatterns(name string, by []limitEntry) (*planItem, error) {
	e := by[0]
	for _, o := range by[1:] {
		if o.cfg != e.cfg {
			return nil, usagef("%s matches both match=%s (line %d) and match=%s (line %d), which ask for different limits: "+
				"give it its own entry (a name wins over patterns) or make the patterns agree; nothing was written",
				shown(name), e.match, e.line, o.match, o.line)
		}
	}
	return &planItem{Name: name, Source: e.source(), Line: e.line, want: e.cfg, Config: limitOf(e.cfg)}, nil
}

// anyConfigField reports whether a hash has any field of a limiter's config.
func anyConfigField(h map[string]string) bool {
	for _, f := range wire.ConfigFields() {
		if _, ok := h[f]; ok {
			return true
		}
	}
	return false
}

// configReason is the library's reason for refusing a limiter's config
// or state, without the limiter's name and the sentinel's words.
func configReason(err error) string {
	var le *ratelimiter.LimiterError
	if errors.As(err, &le) {
		err = le.Err
	}
	msg := err.Error()
	for _, sentinel := range []error{ratelimiter.ErrCorruptState, ratelimiter.ErrNotInitialized} {
		if rest, ok := strings.CutPrefix(msg, sentinel.Error()+": "); ok {
			return printable(rest)
		}
	}
	return printable(strings.TrimPrefix(msg, "ratelimiter: "))
}

// diffConfig lists the fields that differ between what Redis holds and
// what the file asks for.
func diffConfig(cur, want ratelimiter.Config) []fieldChange {
	var out []fieldChange
	if cur.Mode != want.Mode {
		out = append(out, fieldChange{"mode", cur.Mode.String(), want.Mode.String()})
	}
	if cur.Rate != want.Rate {
		out = append(out, fieldChange{"rate", fmt.Sprint(cur.Rate), fmt.Sprint(want.Rate)})
	}
	if cur.Interval != want.Interval {
		out = append(out, fieldChange{"interval", cur.Interval.String(), want.Interval.String()})
	}
	if cur.KeepAlive != want.KeepAlive {
		out = append(out, fieldChange{"keep_alive", durOrOff(cur.KeepAlive), durOrOff(want.KeepAlive)})
	}
	return out
}

// applyPlan carries the plan out: TrySetRate for a limiter to create,
// UpdateRate with KeepState for one to change. A limiter that changed
// meanwhile, or whose state the scripts refuse, is reported and left; an
// error reaching Redis stops it.
func applyPlan(ctx context.Context, client *ratelimiter.Client, p *plan, haveClientID bool) error {
	p.Applied = true
	defer p.count()
	for _, it := range p.Limiters {
		lim := client.Limiter(it.Name)
		var err error
		switch it.Action {
		case "create":
			var done bool
			if done, err = lim.TrySetRate(ctx, it.want); err == nil {
				it.Result = "created"
				if !done {
					it.Result, it.Problem = "skipped", "created by another writer since it was read: not changed (plan again)"
				}
			}
		case "change":
			var done bool
			if done, err = lim.UpdateRate(ctx, it.want, keepState(it.want, haveClientID)...); err == nil {
				it.Result = "changed"
				if !done {
					it.Result, it.Problem = "skipped", "deleted since it was read: not re-created (apply again creates it)"
				}
			}
		case "unchanged":
			it.Result = "unchanged"
		default:
			it.Result = "skipped"
		}
		if err != nil {
			if !errors.Is(err, ratelimiter.ErrCorruptState) && !isReply(err) {
				return fmt.Errorf("%s: %w", it.Name, err)
			}
			it.Result, it.Problem = "skipped", "refused: "+configReason(err)
		}
	}
	return nil
}

// keepState is the option that keeps the permits taken: KeepState, except
// on a PER_CLIENT limiter without --client-id, where it would recount a
// budget of this process's random client id (and leave its value key
// behind). Without it, SetRate resets only that client's budget, which
// holds nothing; every client's records and value stay either way.
func keepState(cfg ratelimiter.Config, haveClientID bool) []ratelimiter.SetRateOption {
	if cfg.Mode == ratelimiter.PerClient && !haveClientID {
		return nil
	}
	return []ratelimiter.SetRateOption{ratelimiter.KeepState()}
}

func printPlan(w io.Writer, p *plan) {
	if len(p.Limiters) > 0 {
		tw := table(w)
		fmt.Fprintln(tw, "ACTION\tNAME\tFROM\tDETAIL")
		for _, it := range p.Limiters {
			action := it.Action
			if p.Applied {
				action = it.Result
			}
			var detail string
			switch {
			case it.Problem != "":
				detail = it.Problem
			case it.Action == "change":
				parts := make([]string, len(it.Changes))
				for i, c := range it.Changes {
					parts[i] = c.Field + " " + c.Old + " -> " + c.New
					if c.Field == "mode" {
						parts[i] += " (resets the state)"
					}
				}
				detail = strings.Join(parts, ", ")
			default:
				detail = describe(it.want)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", action, shown(it.Name), shown(it.Source), printable(detail))
		}
		tw.Flush()
	}
	for _, pr := range p.Patterns {
		switch {
		case pr.Truncated:
			fmt.Fprintf(w, "match=%s (line %d): the scan stopped at --max-scans or --max-limiters; limiters past it were not examined\n", shown(pr.Match), pr.Line)
		case pr.Matched == 0:
			fmt.Fprintf(w, "match=%s (line %d) matches no limiter\n", shown(pr.Match), pr.Line)
		}
	}
	s := p.Summary
	if p.Applied {
		fmt.Fprintf(w, "\napplied %s: %d created, %d changed, %d unchanged, %d %s\n", shown(p.File), s.Created, s.Changed, s.Unchanged, s.Problems, plural(s.Problems, "problem"))
		if s.Created+s.Changed == 0 && s.Problems == 0 {
			fmt.Fprintln(w, "no changes: Redis matched the file")
		}
		return
	}
	fmt.Fprintf(w, "\nplan for %s: %d to create, %d to change, %d unchanged, %d %s\n", shown(p.File), s.Create, s.Change, s.Unchanged, s.Problems, plural(s.Problems, "problem"))
	if s.Create+s.Change == 0 && s.Problems == 0 {
		fmt.Fprintln(w, "no changes: Redis matches the file")
	}
}

func plural(n int, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}
