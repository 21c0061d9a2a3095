package main

import (
	"flag"
	"fmt"
	"io"
	"strings"
)

// shells are the shells "ratelimiter completion" writes a script for.
var shells = []string{"bash", "zsh", "fish"}

func init() {
	commands["completion"] = command{"print a script that completes the commands and their flags in bash, zsh or fish", runCompletion}
}

// runCompletion is the completion command: it prints the script for the
// shell named, made from the command table and each command's flags as
// its -h finds them (flagSink), so that it offers what the commands
// parse.
func runCompletion(argv []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("ratelimiter completion", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	pos, err := parseInterleaved(fs, argv)
	fail := func(format string, args ...any) int {
		fmt.Fprintf(stderr, "ratelimiter completion: %s\n", fmt.Sprintf(format, args...))
		return 2
	}
	switch {
	case err == flag.ErrHelp:
		printHelp(stdout, "usage: ratelimiter completion bash|zsh|fish\n\n"+
			"Prints a script that completes the commands and their flags in that shell; docs/cli.md says\n"+
			"how to load it. Regenerate it after upgrading ratelimiter.", fs)
		return 0
	case err != nil:
		return fail("%v (see ratelimiter completion --help)", err)
	case len(pos) != 1:
		return fail("name one shell: %s", strings.Join(shells, ", "))
	}
	specs, main := completionSpecs()
	switch pos[0] {
	case "bash":
		io.WriteString(stdout, bashCompletion(specs, main))
	case "zsh":
		io.WriteString(stdout, zshCompletion(specs, main))
	case "fish":
		io.WriteString(stdout, fishCompletion(specs, main))
	default:
		return fail("no completion for %s: name one of %s", shown(pos[0]), strings.Join(shells, ", "))
	}
	return 0
}

// cmdSpec is what completion offers for one command.
type cmdSpec struct {
	name, summary string
	flags         []*flagEntry
}

// completionSpecs returns every command, sorted, with the flags its -h
// shows, and the flags that may come before a command.
func completionSpecs() (specs []cmdSpec, main []*flagEntry) {
	for _, name := range commandNames() {
		sink := &flagSink{}
		commands[name].run([]string{"-h"}, sink, io.Discard)
		var flags []*flagEntry
		if sink.fs != nil {
			flags = flagEntries(sink.fs)
		}
		specs = append(specs, cmdSpec{name: name, summary: commands[name].summary, flags: flags})
	}
	var g globals
	fs, _ := mainFlags(&g)
	return specs, flagEntries(fs)
}

// flagWords returns "--name" for every name of flags, and --help.
func flagWords(flags []*flagEntry) []string {
	var out []string
	for _, e := range flags {
		for _, n := range e.names {
			out = append(out, "--"+n)
		}
	}
	return append(out, "--help")
}

// valueNames returns the names, without dashes, of the flags that take a
// value: completion skips that value when it looks for the command and
// offers file names for it.
func valueNames(flags []*flagEntry) []string {
	var out []string
	for _, e := range flags {
		if !isBool(e.flag) {
			out = append(out, e.names...)
		}
	}
	return out
}

// describeShort shortens a summary or a flag's usage for a completion menu:
// its first clause, cut at a space before 70 bytes.
func describeShort(s string) string {
	if i := strings.IndexAny(s, ";("); i > 0 {
		s = s[:i]
	}
	s = strings.TrimSpace(s)
	if len(s) > 70 {
		cut := strings.LastIndex(s[:70], " ")
		s = strings.TrimRight(s[:max(cut, 1)], " ,:") + " ..."
	}
	return s
}

// sq quotes s for a POSIX, zsh or fish shell in single quotes.
func sq(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// fishQuote quotes s for fish, whose single quotes escape ' and \.
func fishQuote(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, "'", `\'`).Replace(s) + "'"
}

func bashCompletion(specs []cmdSpec, main []*flagEntry) string {
	var b strings.Builder
	names := make([]string, len(specs))
	for i, s := range specs {
		names[i] = s.name
	}
	fmt.Fprintf(&b, `# bash completion for ratelimiter, made by "ratelimiter completion bash".
# Load it with: source <(ratelimiter completion bash)
_ratelimiter() {
	local line=${COMP_LINE:0:COMP_POINT} words cur prev cmd= flags values w i n
	read -ra words <<<"$line"
	[[ $line == *[[:space:]] || ${#words[@]} -eq 0 ]] && words+=("")
	n=${#words[@]}
	cur=${words[n-1]}
	prev=${words[n-2]}
	flags=%s
	values=%s
	for ((i = 1; i < n - 1; i++)); do
		w=${words[i]}
		case $w in
		--) ;;
		-*=*) ;;
		-*)
			w=${w#-}
			w=${w#-}
			[[ $values == *" $w "* ]] && ((i++))
			;;
		*)
			cmd=$w
			break
			;;
		esac
	done
	case $cmd in
`, sq(strings.Join(flagWords(main), " ")), sq(" "+strings.Join(valueNames(main), " ")+" "))
	for _, s := range specs {
		fmt.Fprintf(&b, "\t%s) flags=%s values=%s ;;\n", s.name,
			sq(strings.Join(flagWords(s.flags), " ")), sq(" "+strings.Join(valueNames(s.flags), " ")+" "))
	}
	fmt.Fprintf(&b, `	esac
	if [[ $prev == -* && $prev != *=* ]]; then
		w=${prev#-}
		w=${w#-}
		if [[ $values == *" $w "* ]]; then
			compopt -o filenames 2>/dev/null
			COMPREPLY=($(compgen -f -- "$cur"))
			return
		fi
	fi
	if [[ $cur == -* ]]; then
		COMPREPLY=($(compgen -W "$flags" -- "$cur"))
	elif [[ -z $cmd ]]; then
		COMPREPLY=($(compgen -W %s -- "$cur"))
	elif [[ $cmd == completion ]]; then
		COMPREPLY=($(compgen -W %s -- "$cur"))
	fi
}
complete -F _ratelimiter ratelimiter
`, sq(strings.Join(names, " ")), sq(strings.Join(shells, " ")))
	return b.String()
}

// zshDescribed returns the entries of a _describe array: "word:what".
func zshDescribed(flags []*flagEntry) []string {
	var out []string
	for _, e := range flags {
		for _, n := range e.names {
			out = append(out, sq("--"+n+":"+describeShort(e.flag.Usage)))
		}
	}
	return append(out, sq("--help:show the command's flags"))
}

func zshCompletion(specs []cmdSpec, main []*flagEntry) string {
	var b strings.Builder
	b.WriteString(`#compdef ratelimiter
# zsh completion for ratelimiter, made by "ratelimiter completion zsh".
# Load it with: source <(ratelimiter completion zsh)
# or save it as _ratelimiter in a directory of $fpath.
_ratelimiter() {
	local -a cmds opts vals
	local cmd w i
	cmds=(
`)
	for _, s := range specs {
		fmt.Fprintf(&b, "\t\t%s\n", sq(s.name+":"+describeShort(s.summary)))
	}
	fmt.Fprintf(&b, `	)
	opts=(%s)
	vals=(%s)
	for ((i = 2; i < CURRENT; i++)); do
		w=${words[i]}
		case $w in
		(--) ;;
		(-*=*) ;;
		(-*)
			w=${w#-}
			w=${w#-}
			(( ${vals[(Ie)$w]} )) && ((i++))
			;;
		(*)
			cmd=$w
			break
			;;
		esac
	done
	case $cmd in
`, strings.Join(zshDescribed(main), " "), strings.Join(valueNames(main), " "))
	for _, s := range specs {
		fmt.Fprintf(&b, "\t(%s) opts=(%s); vals=(%s) ;;\n", s.name,
			strings.Join(zshDescribed(s.flags), " "), strings.Join(valueNames(s.flags), " "))
	}
	fmt.Fprintf(&b, `	esac
	w=${words[CURRENT-1]}
	if [[ $w == -* && $w != *=* ]]; then
		w=${w#-}
		w=${w#-}
		if (( ${vals[(Ie)$w]} )); then
			_files
			return
		fi
	fi
	if [[ $PREFIX == -* ]]; then
		_describe -t flags flag opts
	elif [[ -z $cmd ]]; then
		_describe -t commands command cmds
	elif [[ $cmd == completion ]]; then
		compadd %s
	fi
}
if [[ $funcstack[1] == _ratelimiter ]]; then
	_ratelimiter "$@"
else
	compdef _ratelimiter ratelimiter
fi
`, strings.Join(shells, " "))
	return b.String()
}

func fishCompletion(specs []cmdSpec, main []*flagEntry) string {
	var b strings.Builder
	fmt.Fprintf(&b, `# fish completion for ratelimiter, made by "ratelimiter completion fish".
# Load it with: ratelimiter completion fish | source
# or save it as ~/.config/fish/completions/ratelimiter.fish.

# __ratelimiter_command prints the command on the line so far, skipping
# the flags before it and their values.
function __ratelimiter_command
	set -l words (commandline -opc)
	set -e words[1]
	set -l skip 0
	for w in $words
		if test $skip -eq 1
			set skip 0
			continue
		end
		switch $w
			case '-*=*' '--'
			case '-*'
				if contains -- (string replace -r -- '^--?' '' $w) %s
					set skip 1
				end
			case '*'
				echo $w
				return 0
		end
	end
	return 1
end

function __ratelimiter_using
	set -l cmd (__ratelimiter_command)
	test "$cmd" = "$argv[1]"
end

complete -c ratelimiter -f
`, strings.Join(valueNames(main), " "))
	flagLines := func(cond string, flags []*flagEntry) {
		for _, e := range flags {
			for _, n := range e.names {
				fmt.Fprintf(&b, "complete -c ratelimiter -n %s -l %s", fishQuote(cond), n)
				if !isBool(e.flag) {
					b.WriteString(" -r -F")
				}
				fmt.Fprintf(&b, " -d %s\n", fishQuote(describeShort(e.flag.Usage)))
			}
		}
		fmt.Fprintf(&b, "complete -c ratelimiter -n %s -l help -d 'show the command\\'s flags'\n", fishQuote(cond))
	}
	for _, s := range specs {
		fmt.Fprintf(&b, "complete -c ratelimiter -n 'not __ratelimiter_command' -a %s -d %s\n", s.name, fishQuote(describeShort(s.summary)))
	}
	flagLines("not __ratelimiter_command", main)
	for _, s := range specs {
		flagLines("__ratelimiter_using "+s.name, s.flags)
	}
	fmt.Fprintf(&b, "complete -c ratelimiter -n '__ratelimiter_using completion' -a %s\n", fishQuote(strings.Join(shells, " ")))
	return b.String()
}
