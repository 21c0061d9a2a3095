// Command modproxy writes a file-based Go module proxy holding this
// repository's modules at one version, zipped from a git revision with
// golang.org/x/mod/zip as the real proxy would serve them, so that
// scripts/install-check.sh can install them as a stranger would
// (GOPROXY=file://...). It is a tool of the repository, not published.
//
//	go run . -repo ../.. -out /tmp/proxy -version v0.1.0 . otel grpclimit
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
	"golang.org/x/mod/zip"
)

func main() {
	repo := flag.String("repo", ".", "the repository's root")
	out := flag.String("out", "", "the proxy directory to write")
	version := flag.String("version", "", "the version to give every module, such as v0.1.0")
	rev := flag.String("rev", "HEAD", "the git revision to zip")
	flag.Parse()
	if *out == "" || *version == "" || flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: modproxy -out DIR -version vX.Y.Z [-repo DIR] [-rev REV] MODULE_DIR...")
		os.Exit(2)
	}
	for _, dir := range flag.Args() {
		if err := write(*repo, dir, *rev, *out, *version); err != nil {
			fmt.Fprintf(os.Stderr, "modproxy: %s: %v\n", dir, err)
			os.Exit(1)
		}
	}
}

// write adds the module in dir (relative to repo) at version to the proxy
// in out: list, .info, .mod and .zip, from revision rev.
func write(repo, dir, rev, out, version string) error {
	gomod, err := exec.Command("git", "-C", repo, "show", rev+":"+filepath.ToSlash(filepath.Join(dir, "go.mod"))).Output()
	if err != nil {
		return fmt.Errorf("reading go.mod at %s: %w", rev, err)
	}
	path := modfile.ModulePath(gomod)
	if path == "" {
		return fmt.Errorf("no module line in go.mod")
	}
	esc, err := module.EscapePath(path)
	if err != nil {
		return err
	}
	at := filepath.Join(out, esc, "@v")
	if err := os.MkdirAll(at, 0o755); err != nil {
		return err
	}
	m := module.Version{Path: path, Version: version}
	f, err := os.Create(filepath.Join(at, version+".zip"))
	if err != nil {
		return err
	}
	subdir := strings.TrimPrefix(filepath.ToSlash(filepath.Clean(dir)), ".")
	subdir = strings.TrimPrefix(subdir, "/")
	if err := zip.CreateFromVCS(f, m, repo, rev, subdir); err != nil {
		f.Close()
		return fmt.Errorf("zipping: %w", err)
	}
	if err := f.Close(); err != nil {
		return err
	}
	info, _ := json.Marshal(struct {
		Version string
		Time    time.Time
	}{version, time.Now().UTC().Truncate(time.Second)})
	for name, data := range map[string][]byte{"list": []byte(version + "\n"), version + ".info": info, version + ".mod": gomod} {
		if err := os.WriteFile(filepath.Join(at, name), data, 0o644); err != nil {
			return err
		}
	}
	fmt.Printf("%s@%s\n", path, version)
	return nil
}
