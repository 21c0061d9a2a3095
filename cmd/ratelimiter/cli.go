package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/redis/go-redis/v9"

	"github.com/goredisson/ratelimiter"
)

// usageError is bad input: exit 2, before anything is sent to Redis.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }

// connErr is a failure to reach Redis: exit 2.
type connErr struct{ msg string }

func (e connErr) Error() string { return e.msg }

// refused means the command ran but did not do what was asked (not
// granted, already configured, nothing changed): exit 1. The result has
// already been printed on stdout.
var errRefused = errors.New("refused")

// cli is what a running admin subcommand works with.
type cli struct {
	cmd    string
	g      globals
	stdout io.Writer
	stderr io.Writer
	name   string   // the limiter's name (the first, when several are given)
	names  []string // every name given (action.several)
	ctx    context.Context
	rdb    redis.UniversalClient
	client *ratelimiter.Client
	lim    *ratelimiter.Limiter
}

// action is a subcommand's body: check validates its flags before any
// connection; run does the work.
type action struct {
	check   func(c *cli) error
	run     func(c *cli) error
	several bool // the command takes one or more names
}

// adminCommand makes a command from a function that defines its flags on
// fs and returns its action.
func adminCommand(name, summary, args string, define func(fs *flag.FlagSet) action) {
	commands[name] = command{summary: summary, run: func(argv []string, stdout, stderr io.Writer) int {
		c := &cli{cmd: name, stdout: stdout, stderr: stderr}
		fs := flag.NewFlagSet("ratelimiter "+name, flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		c.g.register(fs)
		act := define(fs)
		pos, err := parseInterleaved(fs, argv)
		if err == flag.ErrHelp {
			names := "NAME"
			if act.several {
				names = "NAME [NAME...]"
			}
			printHelp(stdout, strings.TrimSpace(fmt.Sprintf("usage: ratelimiter %s %s %s", name, names, args))+"\n\n"+summary+
				"\n\nConnection and client flags may also come before the command.", fs)
			return 0
		}
		if err != nil {
			fmt.Fprintf(stderr, "ratelimiter %s: %v (see ratelimiter %s --help)\n", name, err, name)
			return 2
		}
		return c.finish(c.exec(pos, act))
	}}
}

// parseInterleaved parses flags that may come before, between and after
// positional arguments, and returns the positional ones. After "--"
// everything is positional.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		consumed := len(args) - len(rest)
		if consumed > 0 && args[consumed-1] == "--" {
			return append(pos, rest...), nil
		}
		if len(rest) == 0 {
			return pos, nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

func (c *cli) exec(pos []string, act action) error {
	switch {
	case len(pos) == 0:
		return usagef("missing the limiter NAME (ratelimiter %s NAME ...)", c.cmd)
	case len(pos) > 1 && !act.several:
		return usagef("unexpected argument %q after the limiter name", pos[1])
	}
	for _, n := range pos {
		if n == "" {
			return usagef("empty limiter name")
		}
	}
	c.name, c.names = pos[0], pos
	if err := c.g.check(); err != nil {
		return err
	}
	if act.check != nil {
		if err := act.check(c); err != nil {
			return err
		}
	}
	opts := c.g.clientOptions()
	// go-redis logs dial failures on its own; the one-line message below
	// says it all.
	redis.SetLogger(quietLogger{})
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	c.ctx = ctx
	rdb, err := c.g.connect(ctx)
	if err != nil {
		return err
	}
	defer rdb.Close()
	c.rdb = rdb
	c.client = ratelimiter.NewClient(rdb, opts...)
	c.lim = c.client.Limiter(c.name)
	return act.run(c)
}

// finish maps a command's error to the exit status and prints the
// one-line message.
func (c *cli) finish(err error) int {
	if err == nil {
		return 0
	}
	if errors.Is(err, errRefused) {
		return 1
	}
	msg := strings.TrimPrefix(printable(oneLine(redact(err.Error(), c.g.effectiveURL()))), "ratelimiter: ")
	code := 2
	var ue usageError
	var ce connErr
	switch {
	case errors.As(err, &ue), errors.As(err, &ce):
	case errors.Is(err, ratelimiter.ErrNotInitialized):
		// The limiter refused: it has no configuration. With several
		// names, the error names the one.
		name := c.name
		var le *ratelimiter.LimiterError
		if errors.As(err, &le) && len(c.names) > 1 {
			name = le.Limiter
		}
		msg, code = fmt.Sprintf("limiter %q is not configured (set-rate or try-set-rate first)", name), 1
	case errors.Is(err, ratelimiter.ErrPermitsExceedRate):
		// Asking for more than the rate can never be granted: a usage
		// error, not a refusal.
		msg = "asked for more permits than the limiter's rate (" + msg + ")"
	case errors.Is(err, context.Canceled):
		return 130
	}
	fmt.Fprintf(c.stderr, "ratelimiter %s: %s\n", c.cmd, msg)
	return code
}

// clientOptions are the Client options the global flags ask for: the
// record format, --client-id and --name-prefix.
func (g *globals) clientOptions() []ratelimiter.Option {
	format, _ := parseFormat(g.format)
	opts := []ratelimiter.Option{ratelimiter.WithMemberFormat(format)}
	if g.clientID != "" {
		opts = append(opts, ratelimiter.WithClientID(g.clientID))
	}
	if g.prefix != "" {
		opts = append(opts, ratelimiter.WithNameMapper(g.mapName))
	}
	return opts
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(s, "\n", "; ")), " ")
}

func (c *cli) json() bool { return c.g.output == "json" }

// emit prints v as one line of JSON with -o json, else calls human.
func (c *cli) emit(v any, human func(w io.Writer)) error {
	if c.json() {
		enc := json.NewEncoder(c.stdout)
		return enc.Encode(v)
	}
	human(c.stdout)
	return nil
}

type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}
