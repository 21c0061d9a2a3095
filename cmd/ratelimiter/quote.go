package main

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// shown is s as text output shows a name, key or stored string: as it is
// when every rune is printable (spaces included), else Go-quoted, so
// that control characters never reach the terminal.
func shown(s string) string {
	if utf8.ValidString(s) && strings.IndexFunc(s, func(r rune) bool { return !strconv.IsPrint(r) }) < 0 {
		return s
	}
	return strconv.Quote(s)
}

// printable escapes what is not printable in a message, as %q would,
// without adding quotes.
func printable(s string) string {
	if shown(s) == s {
		return s
	}
	return quoteInner(s)
}
