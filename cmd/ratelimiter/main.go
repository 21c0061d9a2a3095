// Command ratelimiter works with Redisson-compatible rate limiters in
// Redis. Subcommands:
//
//	demo    run workers against a local limiter and print grants per second
//
// Run "ratelimiter <subcommand> -h" for a subcommand's flags.
package main

import (
	"fmt"
	"io"
	"os"
	"sort"
)

// command is one subcommand: it parses its own arguments and returns the
// process exit code (0 done, 1 refused, 2 usage or connection error).
type command struct {
	summary string
	run     func(args []string, stdout, stderr io.Writer) int
}

var commands = map[string]command{
	"demo": {"run workers against a limiter and print grants per second", runDemo},
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stderr)
		return 2
	}
	cmd, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "ratelimiter: unknown command %q (see ratelimiter help)\n", args[0])
		return 2
	}
	return cmd.run(args[1:], stdout, stderr)
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: ratelimiter <command> [flags]\n\ncommands:")
	names := make([]string, 0, len(commands))
	for name := range commands {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		fmt.Fprintf(w, "  %-14s %s\n", name, commands[name].summary)
	}
}
