package ratelimiter_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/goredisson/ratelimiter/internal/redistest"
)

// readmeBuilt are the pages whose Go blocks TestReadmeBuilds builds; the
// first block of each is its main example and must be a whole program.
var readmeBuilt = []string{"README.md", "docs/http.md", "docs/timerate.md"}

// goBlock matches a Go code block of a Markdown page.
var goBlock = regexp.MustCompile("(?ms)^```go\n(.*?)^```")

// The README's Go blocks and the main examples of the pages it names are
// programs that compile as written (a user copies them): every block of
// readmeBuilt that is a whole program (it starts with a package clause)
// is built against this module, and each page's first block must be one.
// The blocks are laid over a directory of the module that does not exist
// on disk (go build -overlay), so the test writes nothing into the tree.
func TestReadmeBuilds(t *testing.T) {
	redistest.SkipIfShort(t, "builds the README's programs")
	root, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	overlay := map[string]string{}
	var pkgs []string
	for _, page := range readmeBuilt {
		text, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		blocks := goBlock.FindAllStringSubmatch(string(text), -1)
		if len(blocks) == 0 {
			t.Errorf("%s: no Go block", page)
			continue
		}
		for i, b := range blocks {
			src := b[1]
			if !strings.HasPrefix(src, "package ") {
				if i == 0 {
					t.Errorf("%s: its first Go block (the main example) is not a whole program", page)
				}
				continue
			}
			name := fmt.Sprintf("%s_%d", strings.NewReplacer("/", "_", ".", "_").Replace(page), i)
			file := filepath.Join(tmp, name+".go")
			if err := os.WriteFile(file, []byte(src), 0o600); err != nil {
				t.Fatal(err)
			}
			dir := filepath.Join(root, "internal", "readmebuild", name)
			overlay[filepath.Join(dir, "main.go")] = file
			pkgs = append(pkgs, "./internal/readmebuild/"+name)
		}
	}
	if len(pkgs) == 0 {
		t.Fatal("no program to build")
	}
	spec, err := json.Marshal(map[string]any{"Replace": overlay})
	if err != nil {
		t.Fatal(err)
	}
	specFile := filepath.Join(tmp, "overlay.json")
	if err := os.WriteFile(specFile, spec, 0o600); err != nil {
		t.Fatal(err)
	}
	// go build of several main packages with -o to a directory writes
	// each binary there.
	cmd := exec.Command("go", append([]string{"build", "-overlay", specFile, "-o", tmp + "/"}, pkgs...)...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GOWORK=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build of the pages' programs: %v\n%s", err, out)
	}
	t.Logf("built %d programs: %v", len(pkgs), pkgs)
}
