package main

import (
	"runtime"
	"runtime/debug"
	"strings"
)

// Stamped at link time by make dist (.goreleaser.yaml's ldflags):
//
//	-X main.stampedVersion=v0.1.0 -X main.stampedRevision=<commit>
//
// Empty in a build by go install or go build, where buildVersion reads
// the build information Go records instead.
var (
	stampedVersion  string
	stampedRevision string
)

// buildVersion returns the CLI's version and the VCS revision it was built
// from. A binary from make dist reports what was stamped into it: the
// version (v0.1.0, or a snapshot's v0.1.1-devel+1a2b3c4) and the full
// commit, with "+modified" if the tree had uncommitted changes. Any other
// build reports what Go recorded: the module version ("v0.1.0" when
// installed with go install ...@v0.1.0; from a checkout, one Go derives
// from the VCS, or "(devel)") and vcs.revision with the same "+modified".
// ver is never empty ("(devel)" when nothing says more); revision is ""
// when unknown: go install ...@version records no revision, and neither
// does a build with -buildvcs=false.
func buildVersion() (ver, revision string) {
	ver, revision = stampedVersion, stampedRevision
	bi, ok := debug.ReadBuildInfo()
	if ok && ver == "" {
		ver = bi.Main.Version
	}
	if ver == "" {
		ver = "(devel)"
	}
	if ok && revision == "" {
		var modified bool
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				revision = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
		if revision != "" && modified {
			revision += "+modified"
		}
	}
	return ver, revision
}

// version returns what "ratelimiter --version" prints: the version, the
// revision when known and the Go version, as in
// "ratelimiter v0.1.0 (<commit>, go1.26.8)" (buildVersion says where
// each comes from).
func version() string {
	ver, revision := buildVersion()
	extra := []string{runtime.Version()}
	if revision != "" {
		extra = []string{revision, runtime.Version()}
	}
	return "ratelimiter " + ver + " (" + strings.Join(extra, ", ") + ")"
}
