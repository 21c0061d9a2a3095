package main

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// A path is the outcome every decision of a throughput run takes.
type path struct {
	name     string
	rate     int64
	interval time.Duration
	warm     int // decisions made before measuring
}

// paths: granted (the rate is never reached; the logs hold one second of
// grants) and refused (one grant per hour, already taken).
var paths = []path{
	{name: "granted", rate: 1_000_000_000, interval: time.Second},
	{name: "refused", rate: 1, interval: time.Hour, warm: 1},
}

// sample is one contender's run at one path and caller count.
type sample struct {
	perSec      float64 // decisions started per second
	cpuUs       float64 // Redis CPU (user + sys) per decision, µs
	scriptUs    float64 // Redis time inside script calls per decision, µs
	scripts     float64 // script calls per decision
	commands    float64 // commands per decision, those run by scripts included
	grantsShare float64 // grants per decision
}

// throughputResult holds the samples by path, caller count and contender.
type throughputResult map[string]map[int][][]sample

// throughput runs every path and caller count, plan.rounds rounds, each
// round every contender in turn on a fresh hot key.
func (b *bench) throughput(ctx context.Context) (throughputResult, error) {
	if err := b.warmup(ctx); err != nil {
		return nil, err
	}
	res := throughputResult{}
	for _, p := range paths {
		res[p.name] = map[int][][]sample{}
		for _, callers := range b.plan.callers {
			all := make([][]sample, len(b.cs))
			for r := 0; r < b.plan.rounds; r++ {
				for _, i := range order(r, len(b.cs)) {
					c := b.cs[i]
					s, err := b.throughputRun(ctx, c, p, callers)
					if err != nil {
						return nil, err
					}
					all[i] = append(all[i], s)
				}
			}
			res[p.name][callers] = all
			b.progress("throughput %s path, %d callers: done", p.name, callers)
		}
	}
	return res, nil
}

// warmup runs every contender with 16 callers for plan.warmup (Redisson
// three times as long, for the JVM's JIT), so the first round is not
// the slowest.
func (b *bench) warmup(ctx context.Context) error {
	for _, c := range b.cs {
		l, key, err := b.opened(ctx, c, "warm", paths[0].rate, paths[0].interval)
		if err != nil {
			return err
		}
		d := b.plan.warmup
		if c.name == redissonName {
			d *= 3
		}
		_, err = l.run(ctx, 16, d, false)
		if err := errors.Join(err, b.drop(ctx, key)); err != nil {
			return fmt.Errorf("%s: warm-up: %w", c.name, err)
		}
	}
	b.progress("warm-up: done")
	return nil
}

func (b *bench) throughputRun(ctx context.Context, c contender, p path, callers int) (sample, error) {
	l, key, err := b.opened(ctx, c, "tp", p.rate, p.interval)
	if err != nil {
		return sample{}, err
	}
	defer b.drop(ctx, key)
	for i := 0; i < p.warm; i++ {
		if _, err := l.once(ctx); err != nil {
			return sample{}, fmt.Errorf("%s: %w", c.name, err)
		}
	}
	before, err := readStats(ctx, b.rdb)
	if err != nil {
		return sample{}, err
	}
	o, err := l.run(ctx, callers, b.plan.round, false)
	if err != nil {
		return sample{}, fmt.Errorf("%s: %d callers: %w", c.name, callers, err)
	}
	after, err := readStats(ctx, b.rdb)
	if err != nil {
		return sample{}, err
	}
	d := after.sub(before)
	decisions := o.decisions
	if decisions < 0 { // Redisson: one script call per tryAcquire
		decisions = d.scriptCalls
	}
	n := float64(max(decisions, 1))
	return sample{
		perSec:      float64(decisions) / b.plan.round.Seconds(),
		cpuUs:       float64(d.cpu.Nanoseconds()) / 1e3 / n,
		scriptUs:    float64(d.scriptUsec) / n,
		scripts:     float64(d.scriptCalls) / n,
		commands:    float64(d.commands) / n,
		grantsShare: float64(o.grants) / n,
	}, nil
}
