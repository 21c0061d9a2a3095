package main

import (
	"runtime/debug"
	"strings"
)

// version returns what "ratelimiter --version" prints, from the build
// information Go records: the module version ("v0.1.0" when installed with
// go install ...@v0.1.0, "(devel)" for a build from a checkout), the VCS
// revision and whether the tree was modified, and the Go version.
func version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "ratelimiter (no build information)"
	}
	v := bi.Main.Version
	if v == "" {
		v = "(devel)"
	}
	var extra []string
	settings := map[string]string{}
	for _, s := range bi.Settings {
		settings[s.Key] = s.Value
	}
	if rev := settings["vcs.revision"]; rev != "" {
		if len(rev) > 12 {
			rev = rev[:12]
		}
		if settings["vcs.modified"] == "true" {
			rev += "+modified"
		}
		extra = append(extra, rev)
	}
	extra = append(extra, bi.GoVersion)
	return "ratelimiter " + v + " (" + strings.Join(extra, ", ") + ")"
}
