package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/goredisson/ratelimiter/internal/compat"
	"github.com/goredisson/ratelimiter/internal/redisproc"
)

// instructionResult is the callgrind count, or why it was left out.
type instructionResult struct {
	counts  []compat.Instructions
	skipped string
}

// instructions counts the instructions Redis executes per tryAcquire,
// Redisson's script against this library's, on a second redis-server of
// its own run under valgrind's callgrind (compat.ScriptInstructions):
// unlike time, the count repeats to a fraction of a percent on a busy
// machine. Without valgrind it says so and counts nothing; without Java
// it counts this library and the one-command script only.
func (b *bench) instructions(ctx context.Context, java bool) (instructionResult, error) {
	cg, err := redisproc.StartCallgrind(ctx)
	if errors.Is(err, redisproc.ErrNoCallgrind) {
		b.progress("instructions: skipped (%v)", err)
		return instructionResult{skipped: "valgrind is not installed (make bench installs it)"}, nil
	}
	if err != nil {
		return instructionResult{}, err
	}
	defer cg.Close()
	rdb := redis.NewClient(&redis.Options{Addr: cg.Addr(), ReadTimeout: time.Minute})
	defer rdb.Close()
	var peer *compat.Peer
	if java {
		p, _, err := startRedisson(ctx, cg.Addr())
		if err != nil {
			return instructionResult{}, err
		}
		if p != nil {
			defer p.Close()
			peer = p.p
		}
	}
	counts, err := compat.ScriptInstructions(ctx, cg, rdb, peer, b.prefix+"instr:", b.plan.instrFill, b.plan.instrCalls)
	if err != nil {
		return instructionResult{}, fmt.Errorf("instructions: %w", err)
	}
	b.progress("instructions: done")
	return instructionResult{counts: counts}, nil
}

func (r *results) instructionTable(w io.Writer) {
	fmt.Fprintf(w, "### Redis instructions per decision (callgrind)\n\n")
	if r.instr.skipped != "" {
		fmt.Fprintf(w, "Skipped: %s.\n\n", r.instr.skipped)
		return
	}
	fmt.Fprintf(w, "A second redis-server run under valgrind's callgrind; instructions it executes per call (everything "+
		"Redis does for it, network handling included, its timer work left out) while each side makes %d calls, one caller, "+
		"counted in three rounds with the sides in turn (the median round shown), on a limiter of its own in the same state (granted and refused: an hour-long window, granted with %d records in it, refused full at 10; "+
		"settling: a 1 ms window, so that each call frees the record of the one before, as on a busy limiter). "+
		"(x) is the ratio to %s.\n\n", r.plan.instrCalls, r.plan.instrFill, redissonName)
	fmt.Fprint(w, "| path | records in the window | Redisson | this library | on the client's clock | one-command script |\n|---|---:|---:|---:|---:|---:|\n")
	for _, c := range r.instr.counts {
		java, ours, client := "— (left out)", group(c.Go, 0), group(c.GoClientClock, 0)
		if c.Redisson > 0 {
			java = group(c.Redisson, 0)
			ours = fmt.Sprintf("%s (%.3fx)", group(c.Go, 0), c.Go/c.Redisson)
			client = fmt.Sprintf("%s (%.3fx)", group(c.GoClientClock, 0), c.GoClientClock/c.Redisson)
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s |\n", c.Path, group(float64(c.Records), 0), java, ours, client, group(c.OneCommand, 0))
	}
	fmt.Fprintln(w)
}
