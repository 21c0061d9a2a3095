// Command ratelimiter works with Redisson-compatible rate limiters in
// Redis: it sets and changes their rates, takes and gives back permits,
// manages their expiry, decodes what they hold (inspect) and shows them
// live (watch). Every admin subcommand takes the limiter name first:
//
//	ratelimiter set-rate api --rate 10 --interval 1s
//	ratelimiter inspect api -o json
//
// The shared flags (connection flags: --url, --cluster, --sentinel, ...;
// client flags: --client-id, --name-prefix, --format; and --output) go
// before or after the subcommand. Exit status: 0 done, 1 refused or not
// all done (not granted, already configured, nothing changed, no such
// limiter, an idle limiter sweep skipped, a search stopped at a bound), 2
// usage or connection error (asking for more permits than the rate
// included), with a one-line message on stderr; plan (a drift check)
// exits 3 when Redis differs from the limits file. "ratelimiter
// --version" prints the version it was built from; "ratelimiter
// completion bash|zsh|fish" a shell completion script.
//
// Run "ratelimiter help" for the subcommands and "ratelimiter
// <subcommand> --help" for a subcommand's flags.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

// command is one subcommand: it parses its own arguments and returns the
// process exit code (0 done, 1 refused or not all done, 2 usage or
// connection error). Its -h goes through printHelp, which completion
// reads its flags from.
type command struct {
	summary string
	run     func(args []string, stdout, stderr io.Writer) int
}

var commands = map[string]command{
	"demo": {demoSummary, runDemo},
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run finds the subcommand after any global flags and runs it with the
// global flags that came before it followed by the rest of the arguments.
func run(args []string, stdout, stderr io.Writer) int {
	var g globals
	fs, showVersion := mainFlags(&g)
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			usage(stdout)
			return 0
		}
		fmt.Fprintf(stderr, "ratelimiter: %v (see ratelimiter --help)\n", err)
		return 2
	}
	rest := fs.Args()
	if *showVersion {
		fmt.Fprintln(stdout, version())
		return 0
	}
	if len(rest) == 0 {
		usage(stderr)
		return 2
	}
	if rest[0] == "help" {
		usage(stdout)
		return 0
	}
	if rest[0] == "version" {
		fmt.Fprintln(stdout, version())
		return 0
	}
	cmd, ok := commands[rest[0]]
	if !ok {
		fmt.Fprintf(stderr, "ratelimiter: unknown command %q (see ratelimiter --help)\n", rest[0])
		return 2
	}
	leading := args[:len(args)-len(rest)]
	if len(leading) > 0 && leading[len(leading)-1] == "--" {
		leading = leading[:len(leading)-1]
	}
	return cmd.run(append(append([]string(nil), leading...), rest[1:]...), stdout, stderr)
}

// mainFlags are the flags that may come before the command: the shared
// ones and --version.
func mainFlags(g *globals) (*flag.FlagSet, *bool) {
	fs := flag.NewFlagSet("ratelimiter", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	g.register(fs)
	return fs, fs.Bool("version", false, "print the version and exit")
}

// commandNames returns the names of the commands, sorted.
func commandNames() []string {
	names := make([]string, 0, len(commands))
	for name := range commands {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

func usage(w io.Writer) {
	var b strings.Builder
	b.WriteString("usage: ratelimiter [flags] <command> [NAME...] [flags]\n\nCommands:\n")
	for _, name := range commandNames() {
		fmt.Fprintf(&b, "  %-14s %s\n", name, commands[name].summary)
	}
	b.WriteString("\nRun \"ratelimiter <command> --help\" for a command's flags. Flags go before or after the command.\n" +
		"Exit status: 0 done; 1 refused, nothing changed, or not all done (a limiter missing, an action\n" +
		"skipped, a scan stopped at a bound); 2 usage or connection error; plan: 3 changes to apply.")
	var g globals
	fs, _ := mainFlags(&g)
	printHelp(w, b.String(), fs)
}
