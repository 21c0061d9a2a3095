package main

import (
	"net/url"
	"sort"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// What the CLI prints never holds a URL's userinfo (user and password),
// whatever its characters: URLs are shown with it replaced, and every
// message passes through redact.

const hidden = "xxxxx"

// userinfo returns the part of raw between "://" (or its start) and the
// last '@', where a user and password go; "" when there is no '@'. It
// reaches further than a URL parser would when the password holds '/',
// '?' or '#', so that what it hides covers the password either way.
func userinfo(raw string) (start, end int) {
	if i := strings.Index(raw, "://"); i >= 0 {
		start = i + 3
	}
	end = strings.LastIndex(raw, "@")
	if end < start {
		return start, start
	}
	return start, end
}

// redactURL returns raw with its userinfo replaced by "xxxxx".
func redactURL(raw string) string {
	start, end := userinfo(raw)
	if end == start {
		return raw
	}
	return raw[:start] + hidden + raw[end:]
}

// parseURL is redis.ParseURL with errors that never show the userinfo. A
// userinfo holding '/', '?' or '#' is refused: a URL parser would take
// part of the password for the host, path or fragment.
func parseURL(raw string) (*redis.Options, error) {
	start, end := userinfo(raw)
	if strings.ContainsAny(raw[start:end], "/?#") {
		return nil, usagef("bad Redis URL %s: percent-encode '/', '?', '#' and '@' in the user and password", redactURL(raw))
	}
	if !strings.Contains(raw, "://") {
		// host:port alone: url.Parse would say "first path segment in URL
		// cannot contain colon", which tells nobody what to write.
		return nil, usagef("bad Redis URL %s: no scheme; write redis://%s (rediss:// for TLS, unix:// for a socket)", redactURL(raw), redactURL(raw))
	}
	o, err := redis.ParseURL(raw)
	if err != nil {
		return nil, usagef("bad Redis URL %s: %s", redactURL(raw), redact(err.Error(), raw))
	}
	return o, nil
}

// redact removes rawURL's userinfo from msg: the URL itself, as written
// and as Go quotes it (%q, as url.Parse's errors do), becomes what
// redactURL shows; the userinfo, the password and their decoded, quoted
// and URL-escaped forms become "xxxxx" wherever they stand, when they are
// at least minSecret bytes long (shorter ones would blank out letters all
// over the message, and no message holds them outside the URL).
func redact(msg, rawURL string) string {
	start, end := userinfo(rawURL)
	if end == start {
		return msg
	}
	shown := redactURL(rawURL)
	msg = strings.ReplaceAll(msg, rawURL, shown)
	msg = strings.ReplaceAll(msg, quoteInner(rawURL), quoteInner(shown))
	info := rawURL[start:end]
	// The password follows the first ':' (the user can hold none), but
	// take what follows every ':' in case the user broke that rule.
	secrets := []string{info}
	for i := range info {
		if info[i] == ':' {
			secrets = append(secrets, info[i+1:])
		}
	}
	if u, err := url.Parse(rawURL); err == nil && u.User != nil {
		p, _ := u.User.Password()
		secrets = append(secrets, u.User.Username(), p)
	}
	var all []string
	for _, s := range secrets {
		all = append(all, s, quoteInner(s), url.QueryEscape(s), url.PathEscape(s))
	}
	// Longest first, so that a part never leaves the rest of a whole.
	sort.Slice(all, func(i, j int) bool { return len(all[i]) > len(all[j]) })
	for _, s := range all {
		if len(s) >= minSecret {
			msg = strings.ReplaceAll(msg, s, hidden)
		}
	}
	return msg
}

// minSecret is the shortest part of a userinfo that redact blanks out
// wherever it stands.
const minSecret = 4

// quoteInner is s as %q writes it, without the quotes.
func quoteInner(s string) string {
	q := strconv.Quote(s)
	return q[1 : len(q)-1]
}
