package script

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

// Under load the pipe (pipe.go) sends the acquire calls that waited for
// a flight in one pipeline. Those of one acquire script go further: they
// are decided in one script call (lua/many.lua). Each call still runs
// acquire.lua's code on its own keys, and gets the reply it would have
// got alone. What Redis saves is not the script call itself (measured
// with callgrind, a script call per call cost about what the loop over
// the calls does) but the tables per call it no longer makes (Redis's
// KEYS and ARGV for each call; decideBody) and the clock it reads once
// per eight calls (lua/many_clock.lua), with its locals made once: a
// decision costs 0.77x a pipeline's instructions (TestManyInstructions,
// docs/combining.md).

// manyScript is an acquire script's copy that decides several calls.
type manyScript struct {
	s   *redis.Script
	src string
	i   int // its slot in pipe.many
}

// acquireClock is acquire.lua's reading of the server's clock, which a
// many script replaces with serverNow (lua/many_clock.lua).
const acquireClock = "local t = rcall('TIME')\n  stamp = t[1] .. string.sub('00000' .. t[2], -6, -4)"

// acquireLocals is acquire.lua's line making Redis's command functions
// locals, which a many script makes once for all its calls
// (lua/many_clock.lua).
const acquireLocals = "local rcall, rpcall = redis.call, redis.pcall\n"

// many returns the script deciding several calls of the script src.
func many(i int, src string) *manyScript {
	src = luaManyClock + "local function decide(KEYS, ARGV, KB, AB, NK, NA)\n" + decideBody(src) + "\nend\n" + luaMany
	return &manyScript{s: redis.NewScript(src), src: src, i: i}
}

// decideBody returns the acquire script src as the body of many.lua's
// decide(KEYS, ARGV, KB, AB, NK, NA): it reads the server's clock
// through serverNow, uses the many script's locals for Redis's command
// functions, and reads each call's keys and arguments where they lie in
// the many script's own, KEYS[KB + k] and ARGV[AB + k], NK and NA of
// them. Copying them into a pair of tables refilled for each call cost
// Redis about 4,000 instructions a decision (docs/combining.md, "Many
// limiters"). It panics (caught by every test) when src lacks the one
// clock reading, the one line of locals, or the one count of keys
// (#KEYS ==) and of arguments (#ARGV do) it rewrites, or reads KEYS or
// ARGV another way.
func decideBody(src string) string {
	body := strings.Replace(src, acquireClock, "stamp, now = serverNow()", 1)
	if body == src || strings.Count(src, "#KEYS ==") != 1 || strings.Count(src, "#ARGV do") != 1 || strings.Count(src, acquireLocals) != 1 {
		panic("ratelimiter: the acquire script lacks its clock reading, its counts of keys and arguments or its locals")
	}
	body = strings.Replace(body, acquireLocals, "", 1)
	body = strings.NewReplacer("KEYS[", "KEYS[KB + ", "ARGV[", "ARGV[AB + ", "#KEYS ==", "NK ==", "#ARGV do", "NA do").Replace(body)
	if otherUse.MatchString(body) {
		panic("ratelimiter: the acquire script reads KEYS or ARGV other than by index: " + otherUse.FindString(body))
	}
	return body
}

// otherUse matches KEYS or ARGV in code but as KEYS[KB + or ARGV[AB +
// (outside comments: a line's text after "--" is not code).
var otherUse = regexp.MustCompile(`(?m)^(?:[^-\n]|-[^-\n])*\b(?:KEYS|ARGV)\b(?:[^\[]|\[[^KA]|$)`)

// The states of a many script on the Conn's server (pipe.many).
const (
	manyUnsent  int32 = iota // not known to the server: the next batch goes with EVAL
	manyLoaded               // sent: batches go with EVALSHA
	manyLost                 // the server answered NOSCRIPT: plain pipelines until a call's own EVAL
	manyRefused              // the ACL refused its EVAL: plain pipelines from now on
)

// manyBatch is the calls of one many script in a pipeline.
type manyBatch struct {
	m     *manyScript
	calls []*pipedCall
	cmd   *redis.Cmd
}

// command is one command of a pipeline: a call alone (one set), or the
// calls that one script call decides (many set).
type command struct {
	one  *pipedCall
	many *manyBatch
}

// commands returns batch's calls as the pipeline's commands, in the order
// the calls queued: each run of two or more consecutive calls of one
// acquire script, whose many script the server has or is sent now, as
// one script call; every other call alone. Keeping the order keeps the
// calls deciding in the order they came, as one by one in a pipeline
// (a composite that queued before single-limiter calls is decided before
// them).
func (p *pipe) commands(batch []*pipedCall) []command {
	var out []command
	var run []*pipedCall
	var runOf *manyScript
	flush := func() {
		if len(run) == 1 {
			out = append(out, command{one: run[0]}) // one call: its own EVALSHA is cheaper
		} else if len(run) > 1 {
			out = append(out, command{many: &manyBatch{m: runOf, calls: run, cmd: p.manyCmd(runOf, run)}})
		}
		run, runOf = nil, nil
	}
	for _, q := range batch {
		m := manyOf[q.script]
		if m == nil || p.many[m.i].Load() >= manyLost {
			flush()
			out = append(out, command{one: q})
			continue
		}
		if m != runOf {
			flush()
			runOf = m
		}
		run = append(run, q)
	}
	flush()
	return out
}

// manyCmd returns the script call deciding calls: EVALSHA, or EVAL
// while the server may not have the script.
func (p *pipe) manyCmd(m *manyScript, calls []*pipedCall) *redis.Cmd {
	nk, na := 0, 1
	for _, q := range calls {
		nk, na = nk+len(q.keys), na+2+len(q.args)
	}
	a := make([]any, 3, 3+nk+na)
	a[0], a[1], a[2] = "evalsha", m.s.Hash(), nk
	if p.many[m.i].Load() == manyUnsent {
		a[0], a[1] = "eval", m.src
	}
	for _, q := range calls {
		// Each call's keys as its own EVALSHA holds them (evalSha),
		// already made interface values.
		a = append(a, q.cmd.Args()[3:3+len(q.keys)]...)
	}
	a = append(a, len(calls))
	for _, q := range calls {
		a = append(a, len(q.keys), len(q.args))
		a = append(a, q.args...)
	}
	return redis.NewCmd(context.Background(), a...)
}

// answer gives each call of b its reply from b's script call. On an
// error of the whole call each gets that error (pipe.go's settle then
// sends each again on its own when go-redis would retry it); NOSCRIPT
// (the server lost its scripts) reaches the callers, whose own EVAL tells
// the Conn of the restart (restart.go), and batches wait for it
// (reloaded). When the server refused the EVAL of the script itself, the
// calls go again on their own; refused by the ACL, later batches are
// plain pipelines.
func (p *pipe) answer(rdb redis.UniversalClient, b *manyBatch, pipeErr error) {
	err := b.cmd.Err()
	if err == nil && b.cmd.Val() == nil {
		err = pipeErr
	}
	if err != nil {
		if redis.HasErrorPrefix(err, "NOSCRIPT") {
			p.many[b.m.i].Store(manyLost)
		} else if b.cmd.Args()[0] == "eval" && !retryable(err) && isRedisError(err) {
			// Whatever the server refused in the EVAL, each call gets
			// its own answer; without EVAL (an ACL) batches stop.
			if redis.HasErrorPrefix(err, "NOPERM") {
				p.many[b.m.i].Store(manyRefused)
			}
			for _, q := range b.calls {
				_ = rdb.Process(q.ctx, q.cmd)
			}
			return
		}
		for _, q := range b.calls {
			q.cmd.SetErr(err)
		}
		return
	}
	p.many[b.m.i].CompareAndSwap(manyUnsent, manyLoaded)
	vals, ok := b.cmd.Val().([]any)
	if !ok || len(vals) != len(b.calls) {
		err := fmt.Errorf("ratelimiter: a script call deciding %d calls replied %T of %d", len(b.calls), b.cmd.Val(), len(vals))
		for _, q := range b.calls {
			q.cmd.SetErr(err)
		}
		return
	}
	for i, q := range b.calls {
		if e, isErr := vals[i].(error); isErr {
			q.cmd.SetErr(e)
		} else {
			q.cmd.SetVal(vals[i])
		}
	}
}

// reloaded is called when a call of s ran with EVAL after NOSCRIPT (its
// restart checks done, restart.go): s's many script goes with the next
// batch again.
func (p *pipe) reloaded(s *redis.Script) {
	if m := manyOf[s]; m != nil {
		p.many[m.i].CompareAndSwap(manyLost, manyUnsent)
	}
}

// isRedisError reports whether err is a reply of the server (not a
// connection error or a timeout).
func isRedisError(err error) bool {
	var re redis.Error
	return errors.As(err, &re)
}

// manyStates holds the state of each many script on one server.
type manyStates [3]atomic.Int32
