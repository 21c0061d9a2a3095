#!/usr/bin/env bash
# Checks what make dist or make dist-host left in dist/ (make test runs it
# after make dist-host):
#  - the SHA-256 checksums file verifies (sha256sum -c) and lists every
#    archive and SBOM;
#  - every binary has its archive and a CycloneDX SBOM whose main component
#    is the CLI at the build's version, for the binary's GOOS and GOARCH;
#  - the binary for this machine prints that version and the commit it was
#    built from (HEAD, "+modified" when the tree has uncommitted changes);
#  - reproducible: this machine's target built once more (make dist-host,
#    with VERSION for a release) from a clone of HEAD in another directory
#    gives the same checksums. Skipped when the tree has uncommitted
#    changes: the clone builds HEAD.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dist=$root/dist
[ -f "$dist/artifacts.json" ] || { echo "dist-check: no $dist/artifacts.json: run make dist or make dist-host first" >&2; exit 1; }

head=$(git -C "$root" rev-parse HEAD)
dirty=$(git -C "$root" status --porcelain)
revision=$head
[ -n "$dirty" ] && revision+=+modified

(cd "$dist" && python3 - "$revision" "$(go env GOOS)" "$(go env GOARCH)") <<'PY'
import json, subprocess, sys
from urllib.parse import parse_qs, urlsplit

revision, goos, goarch = sys.argv[1:]

def fail(msg):
    sys.exit("dist-check: " + msg)

meta = json.load(open("metadata.json"))
arts = json.load(open("artifacts.json"))
version = "v" + meta["version"]

sums = [a["name"] for a in arts if a["type"] == "Checksum"]
if len(sums) != 1:
    fail(f"want one checksums file, found {sums}")
subprocess.run(["sha256sum", "--strict", "--quiet", "-c", sums[0]], check=True)
listed = {line.split()[1] for line in open(sums[0])}

archives = {(a["goos"], a["goarch"]): a["name"] for a in arts if a["type"] == "Archive"}
sboms = {}
for a in arts:
    if a["type"] != "SBOM":
        continue
    if a["name"] not in listed:
        fail(f"{a['name']} is not in {sums[0]}")
    main = json.load(open(a["name"]))["metadata"]["component"]
    if main["name"] != "github.com/goredisson/ratelimiter/cmd/ratelimiter" or main["version"] != version:
        fail(f"{a['name']} describes {main['name']} {main['version']}, want the CLI at {version}")
    q = parse_qs(urlsplit(main["purl"]).query)
    sboms[(q["goos"][0], q["goarch"][0])] = a["name"]

binaries = {(a["goos"], a["goarch"]): a["path"] for a in arts if a["type"] == "Binary"}
if not binaries:
    fail("no binaries")
for target in binaries:
    name = "/".join(target)
    if target not in archives or archives[target] not in listed:
        fail(f"{name}: no archive in {sums[0]}")
    if target not in sboms:
        fail(f"{name}: no SBOM")
if (goos, goarch) not in binaries:
    fail(f"no binary for this machine ({goos}/{goarch})")

path = binaries[(goos, goarch)].removeprefix("dist/")
got = subprocess.run([path, "--version"], capture_output=True, text=True, check=True).stdout
want = f"ratelimiter {version} ({revision}, "
if not got.startswith(want):
    fail(f"{path} --version printed {got!r}, want it to start with {want!r}"
         " (is dist/ from another commit, or from before a change? run make dist or make dist-host again)")
print(f"dist-check: {len(binaries)} binaries, their archives and SBOMs verify against {sums[0]}; {path} --version: {got.strip()}")
PY

if [ -n "$dirty" ]; then
  echo "dist-check: uncommitted changes: the reproducibility check builds HEAD, skipped"
  exit 0
fi
# A release's metadata names its tag and the version is the tag's; a
# snapshot's version is the next patch's pre-release.
release=$(python3 -c 'import json, sys; m = json.load(open(sys.argv[1])); print(m["tag"] if m["tag"] == "v" + m["version"] else "")' "$dist/metadata.json")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
git clone -q --no-checkout "$root" "$tmp/repo"
git -C "$tmp/repo" checkout -q --detach "$head"
if ! make -C "$tmp/repo" --no-print-directory dist-host VERSION="$release" CLI_WORK_FILE="$tmp/cli.work" \
    DIST_HOST_CONFIG="$tmp/goreleaser-host.yaml" >"$tmp/log" 2>&1; then
  cat "$tmp/log"
  echo "dist-check: make dist-host in a clone of HEAD failed" >&2
  exit 1
fi
# Every line of the clone's checksums (this machine's archive and SBOM)
# must be in ours, byte for byte.
again=$(echo "$tmp"/repo/dist/*_checksums.txt)
ours=$dist/$(basename "$again")
[ -f "$ours" ] || { echo "dist-check: the clone wrote $(basename "$again"), dist/ has no such file" >&2; exit 1; }
missing=$(grep -vxF -f "$ours" "$again" || true)
if [ -n "$missing" ]; then
  echo "dist-check: built again from a clone of HEAD, these differ:" >&2
  echo "$missing" >&2
  exit 1
fi
echo "dist-check: built again from a clone of HEAD in another directory: $(wc -l <"$again") checksums the same"
