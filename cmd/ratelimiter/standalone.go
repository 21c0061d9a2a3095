package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/redis/go-redis/v9"
)

// standalone describes a command that takes no limiter name (exporter,
// sweep): its own flags beside the global ones.
type standalone struct {
	name     string
	usage    string // printed by -h before the flags
	register func(fs *flag.FlagSet)
	check    func() error
	// connOnly: of the shared flags, take only the connection flags
	// (--url, --cluster, --sentinel, --redis-timeout, --ca,
	// --insecure-skip-verify), so that -h lists no flag the command
	// ignores.
	connOnly bool
	// withClient: with connOnly, the client flags too (--client-id,
	// --name-prefix, --format), for a command that takes permits but
	// prints no table (serve).
	withClient bool
	// lazy: start whether or not Redis answers (the exporter); a failed
	// PING is logged on stderr, not fatal.
	lazy bool
}

// session is what a standalone command runs with: the connected Redis
// client, a context that SIGINT and SIGTERM end, the global flags, and
// fail, which prints "ratelimiter NAME: message" and returns code.
type session struct {
	ctx  context.Context
	rdb  redis.UniversalClient
	g    *globals
	fail func(code int, format string, args ...any) int
}

// run parses argv, handles -h and usage errors (exit 2), connects and
// calls body, returning its exit code.
func (s standalone) run(argv []string, stdout, stderr io.Writer, body func(se session) int) int {
	var g globals
	fs := flag.NewFlagSet("ratelimiter "+s.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	if s.connOnly {
		g.registerConn(fs)
		if s.withClient {
			g.registerClient(fs)
		}
	} else {
		g.register(fs)
	}
	s.register(fs)
	fail := func(code int, format string, args ...any) int {
		fmt.Fprintf(stderr, "ratelimiter %s: %s\n", s.name, oneLine(fmt.Sprintf(format, args...)))
		return code
	}
	pos, err := parseInterleaved(fs, argv)
	switch {
	case err == flag.ErrHelp:
		printHelp(stdout, s.usage, fs)
		return 0
	case err != nil:
		return fail(2, "%v (see ratelimiter %s --help)", err, s.name)
	case len(pos) > 0:
		return fail(2, "unexpected argument %s", shown(pos[0]))
	}
	if err := errors.Join(g.check(), s.check()); err != nil {
		return fail(2, "%v", err)
	}
	redis.SetLogger(quietLogger{})
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var rdb redis.UniversalClient
	if s.lazy {
		rdb, err = g.newClient()
		if err == nil {
			if perr := g.ping(ctx, rdb); perr != nil {
				fmt.Fprintf(stderr, "ratelimiter %s: %s\n", s.name, oneLine(perr.Error()))
			}
		}
	} else {
		rdb, err = g.connect(ctx)
	}
	if err != nil {
		return fail(2, "%s", redact(err.Error(), g.effectiveURL()))
	}
	defer rdb.Close()
	return body(session{ctx: ctx, rdb: rdb, g: &g, fail: fail})
}
