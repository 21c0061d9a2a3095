package main

import (
	"flag"
	"fmt"
	"io"
	"reflect"
	"sort"
	"strings"
)

// Help. A command's -h prints its usage and summary, then its own flags,
// then the shared flags in two groups under headings of their own: those
// that say how to reach Redis and those that configure the library's
// Client. Every flag is printed with two dashes; the parser (package
// flag) takes one or two.

// flagGroup is a heading of help and the shared flags it lists.
type flagGroup struct {
	heading string
	names   map[string]bool
}

// sharedGroups are the headings after a command's own flags, in order;
// a flag in none of them is the command's own (--output among them).
var sharedGroups = []flagGroup{
	{"Connection flags", definedBy(func(fs *flag.FlagSet) { new(globals).registerConn(fs) })},
	{"Client flags", definedBy(func(fs *flag.FlagSet) { new(globals).registerClient(fs) })},
}

// definedBy returns the names of the flags define defines.
func definedBy(define func(fs *flag.FlagSet)) map[string]bool {
	fs := flag.NewFlagSet("", flag.ContinueOnError)
	define(fs)
	names := map[string]bool{}
	fs.VisitAll(func(f *flag.Flag) { names[f.Name] = true })
	return names
}

// flagSink is a writer that takes a command's flag set instead of its
// help: completion runs each command with -h and this as stdout, so that
// it offers the flags the command parses.
type flagSink struct{ fs *flag.FlagSet }

func (*flagSink) Write(p []byte) (int, error) { return len(p), nil }

// printHelp prints head (the usage line and what the command does), then
// the flags of fs under their headings; to a flagSink it hands fs over
// instead.
func printHelp(w io.Writer, head string, fs *flag.FlagSet) {
	if s, ok := w.(*flagSink); ok {
		s.fs = fs
		return
	}
	fmt.Fprintln(w, strings.TrimRight(head, "\n"))
	own := flagGroup{heading: "Flags"}
	groups := append([]flagGroup{own}, sharedGroups...)
	byGroup := make([][]*flagEntry, len(groups))
	for _, e := range flagEntries(fs) {
		i := 0
		for j, g := range groups[1:] {
			if g.names[e.names[0]] {
				i = j + 1
			}
		}
		byGroup[i] = append(byGroup[i], e)
	}
	for i, g := range groups {
		if len(byGroup[i]) == 0 {
			continue
		}
		fmt.Fprintf(w, "\n%s:\n", g.heading)
		for _, e := range byGroup[i] {
			e.print(w)
		}
	}
}

// flagEntry is one flag of help: its names (aliases of one variable,
// longest first, as --output and --o) and the flag whose usage it shows.
type flagEntry struct {
	names []string
	flag  *flag.Flag
}

// flagEntries returns the flags of fs, aliases folded into one entry,
// sorted by their first name.
func flagEntries(fs *flag.FlagSet) []*flagEntry {
	var out []*flagEntry
	fs.VisitAll(func(f *flag.Flag) {
		for _, e := range out {
			if sameVar(e.flag.Value, f.Value) {
				e.names = append(e.names, f.Name)
				if strings.HasPrefix(e.flag.Usage, "same as ") {
					e.flag = f
				}
				return
			}
		}
		out = append(out, &flagEntry{names: []string{f.Name}, flag: f})
	})
	for _, e := range out {
		sort.SliceStable(e.names, func(i, j int) bool { return len(e.names[i]) > len(e.names[j]) })
	}
	sort.Slice(out, func(i, j int) bool { return out[i].names[0] < out[j].names[0] })
	return out
}

// sameVar reports whether two flag values set one variable: pointers to
// it (fs.StringVar twice on &v). A flag.Func value is never the same.
func sameVar(a, b flag.Value) bool {
	va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
	return va.Kind() == reflect.Pointer && va.Type() == vb.Type() && va.Pointer() == vb.Pointer()
}

// isBool reports whether f takes no value (--keep-state, not --rate 5).
func isBool(f *flag.Flag) bool {
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// helpWidth is where print wraps a flag's usage.
const helpWidth = 80

// print writes the entry as "  --output, --o string" and its usage,
// indented and wrapped, with the default unless it is the zero value.
func (e *flagEntry) print(w io.Writer) {
	typ, usage := flag.UnquoteUsage(e.flag)
	if typ == "value" { // flag.Func: every one of ours takes text
		typ = "string"
	}
	line := "  --" + strings.Join(e.names, ", --")
	if typ != "" {
		line += " " + typ
	}
	fmt.Fprintln(w, line)
	switch def := e.flag.DefValue; {
	case def == "" || def == "0" || def == "0s" || def == "false":
	case typ == "string":
		usage += fmt.Sprintf(" (default %q)", def)
	default:
		usage += fmt.Sprintf(" (default %s)", def)
	}
	const indent = "      "
	line = indent
	for _, word := range strings.Fields(usage) {
		if len(line) > len(indent) && len(line)+1+len(word) > helpWidth {
			fmt.Fprintln(w, line)
			line = indent
		}
		if len(line) > len(indent) {
			line += " "
		}
		line += word
	}
	fmt.Fprintln(w, line)
}
