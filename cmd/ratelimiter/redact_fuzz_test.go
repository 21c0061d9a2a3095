package main

import (
	"fmt"
	"net/url"
	"strings"
	"testing"
)

// FuzzRedact: whatever the user and password hold, no message the CLI
// builds from a URL shows the password: the URL as shown, the parse error,
// and messages that quote, escape or decode the URL.
func FuzzRedact(f *testing.F) {
	for _, s := range [][2]string{
		{"alice", "pw"}, {"u", "a/b"}, {"u", "a?b"}, {"u", "a#b"}, {"u", `a"b`}, {"u", `a\b`},
		{"u", "a@b"}, {"u", "a%zz"}, {"u", "a:b"}, {"", "\x00\xff"}, {"u:v", "a/b:6379"}, {"u/x", "p"},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, user, pw string) {
		const a, b = "SECRETA", "SECRETB"
		secret := a + pw + b
		raw := "redis://" + user + ":" + secret + "@127.0.0.1:6379/0"
		out := []string{redactURL(raw)}
		if _, err := parseURL(raw); err != nil {
			out = append(out, err.Error())
		}
		decoded := secret
		if u, err := url.Parse(raw); err == nil && u.User != nil {
			decoded, _ = u.User.Password()
		}
		out = append(out, redact(fmt.Sprintf("%s %q %s %s %q", raw, raw, url.QueryEscape(raw), decoded, decoded), raw))
		for _, o := range out {
			if strings.Contains(o, a) || strings.Contains(o, b) {
				t.Fatalf("user %q password %q shows in %q", user, pw, o)
			}
		}
	})
}

// A URL without a scheme (host:port, as redis-cli takes it) gets a hint
// that says what to write, not url.Parse's "first path segment in URL
// cannot contain colon"; a password in it stays hidden.
func TestURLWithoutScheme(t *testing.T) {
	for _, c := range []struct{ raw, want string }{
		{"127.0.0.1:6379", "write redis://127.0.0.1:6379"},
		{"alice:s3cretpw@127.0.0.1:6379/0", "write redis://xxxxx@127.0.0.1:6379/0"},
	} {
		_, err := parseURL(c.raw)
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "s3cretpw") {
			t.Errorf("parseURL(%q): %v, want a usage error that says %q", c.raw, err, c.want)
		}
	}
	if _, err := parseURL("redis://127.0.0.1:6379/0"); err != nil {
		t.Errorf("a URL with its scheme: %v", err)
	}
}
