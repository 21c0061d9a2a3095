# The two commands of README.md: `make demo` and `make test`. Both install
# what a fresh Debian machine lacks (redis-server, redis-sentinel,
# redis-cli and valgrind; for the tests also Java 17, Maven and Prometheus
# with promtool) before they run.

GO ?= go

# The core module is built and tested on its own (GOWORK=off): go.mod's go
# line (1.25) and its minimum go-redis hold, and -modfile works. The other
# modules (cmd/ratelimiter, otel, grpclimit, bench) require released
# versions of the core; $(WORK) gives them the core beside them through
# go.work.
export GOWORK := off
WORK := GOWORK=$(CURDIR)/go.work
# The CLI's tests run in a workspace of the core and the CLI alone: go.work
# also holds otel, whose newer go-redis would win there, while `go install
# .../cmd/ratelimiter@version` builds with the go-redis the core and the
# CLI require (go.mod's minimum).
# One file per user and checkout: two checkouts on one machine must not
# build each other's code.
CLI_WORK_FILE := $(or $(TMPDIR),/tmp)/ratelimiter-cli-$(shell id -u)-$(shell printf %s '$(CURDIR)' | cksum | cut -d' ' -f1).work
CLI_WORK := GOWORK=$(CLI_WORK_FILE)
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
APT_UPDATED := /tmp/.ratelimiter-apt-updated

# go.mod requires the oldest go-redis the whole suite passes with, v9.17.2:
# v9.15 and older lack Options.DialerRetries (the CLI sets it); v9.16.0 logs
# a maintnotifications line on Redis 7.0 that the CLI's tests refuse;
# v9.17.0 hung the Sentinel failover test in its connection pool (a
# control client's SET blocked for minutes past its deadline, go-redis
# issue 3619, fixed in v9.17.2). test-newest runs the quick suite once more
# against the newest release we know, from a temporary copy of go.mod
# (-modfile), so go.mod itself is not touched.
GO_REDIS_NEWEST ?= v9.23.0
NEWEST_MOD := $(or $(TMPDIR),/tmp)/ratelimiter-go-redis-newest.mod

# staticcheck, pinned here alone, runs in every module (make lint, part of
# make test; CONTRIBUTING.md says why it and not golangci-lint). It is
# installed outside the repository, in the user's cache, so that no module
# requires it and a fresh machine (CI) gets this version on the first run.
STATICCHECK_VERSION := v0.8.2
TOOLS := $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/ratelimiter/tools
STATICCHECK := $(TOOLS)/staticcheck

# Envoy's own rate-limit service, which the bench's service section runs
# beside `ratelimiter serve` (bench/service.go): built from its Go module
# once into the tools cache, where the section looks for it when run
# without make. The module proxy lists no release of it, only
# pseudo-versions: this is @latest on 2026-11-27, its commit of
# 2026-01-22. bench/service.go pins the same (TestEnvoyRatelimitVersion).
ENVOY_RATELIMIT_VERSION := v1.4.1-0.20260122083618-3fb702589d36
ENVOY_RATELIMIT := $(TOOLS)/envoy-ratelimit-$(ENVOY_RATELIMIT_VERSION)/service_cmd

# REDIS_SERVER=/path/to/redis-server (or valkey-server) runs every harness
# on that build: the Go harnesses and topologies/*.sh read it, and a PATH
# shim (scripts/servers.sh) makes redis-server and redis-sentinel that
# binary for the tools that look them up by name.
ifneq ($(REDIS_SERVER),)
SERVER_SHIM := $(shell bash scripts/servers.sh shim $(REDIS_SERVER))
export PATH := $(SERVER_SHIM):$(PATH)
export REDIS_SERVER
export REDIS_SENTINEL ?= $(SERVER_SHIM)/redis-sentinel
endif

.PHONY: install-check demo cli-work test test-compat test-compat-long test-compat-rest test-modules-a test-modules-b test-dist test-short test-newest test-oldest test-servers servers deps deps-redis deps-java deps-prometheus peer vet lint deps-staticcheck bench bench-quick soak fairness-table

demo: deps-redis
	cd cmd/ratelimiter && $(WORK) $(GO) run . demo

# The core module's packages one at a time (-p 1), the compatibility suite
# left for later: the failover tests measure deadlines, and the
# compatibility suite's mixed load saturates both cores, so on a 2-core
# machine the two side by side would stall each other. The compatibility
# suite then runs in two lanes (test-compat-long, its three longest tests,
# and test-compat-rest) beside the quick suites, which hold no deadline (the
# other modules, the dist snapshot, test-newest and test-oldest, both
# -short, and install-check), three lanes at a time; its shares and windows
# have bands measured with a full suite beside them. vet and lint run side
# by side before.
test: deps
	$(MAKE) -j2 --output-sync=target vet lint
	$(GO) test -race -count=1 -p 1 -timeout 14m $$($(GO) list ./... | grep -v '/internal/compat$$')
	$(MAKE) cli-work
	$(MAKE) -j3 --output-sync=target test-compat-long test-compat-rest test-modules-a test-modules-b test-dist test-newest test-oldest install-check
	$(MAKE) test-servers

# The Redisson compatibility suite under the race detector, in two parts
# that make test runs side by side: the three tests that measure shares
# and windows over a minute or more (about 3.5 minutes), and the rest
# (about 3 minutes). test-compat runs both, one after the other.
COMPAT_LONG := TestMixedLoad$$|TestSoak$$|TestFairShare$$
test-compat: test-compat-long test-compat-rest
test-compat-long: peer
	$(GO) test -race -count=1 -timeout 14m -run '$(COMPAT_LONG)' ./internal/compat
test-compat-rest: peer
	$(GO) test -race -count=1 -timeout 14m -skip '$(COMPAT_LONG)' ./internal/compat

# The other modules' suites, in two lanes side by side (make test runs
# them with -j2): none of them holds a failover deadline or a share, and
# one at a time they left a core idle for about three minutes of CI.
test-modules-a: cli-work
	cd cmd/ratelimiter && $(CLI_WORK) $(GO) test -race -count=1 -p 1 -timeout 10m ./...
	cd otel && $(WORK) $(GO) test -race -count=1 -p 1 -timeout 5m ./...
	cd grpclimit && $(WORK) $(GO) test -race -count=1 -p 1 -timeout 5m ./...

test-modules-b: $(ENVOY_RATELIMIT)
	cd bench && $(WORK) $(GO) test -race -count=1 -p 1 -timeout 6m ./...

# make dist's snapshot of this machine's target, checked (dist-check): a
# third lane beside the modules' suites, as on a fresh machine it first
# builds goreleaser and cyclonedx-gomod (about 6 minutes of compiling).
# One after the other: under make test's -j3, one sub-make would run them
# side by side.
test-dist:
	$(MAKE) dist-host VERSION=
	$(MAKE) dist-check VERSION=

# The core suite on one redis-server, without Java, Cluster, Sentinel and
# failover: the contributor's quick loop.
test-short: deps-redis deps-prometheus cli-work
	$(GO) test -short -race -count=1 ./...
	cd cmd/ratelimiter && $(CLI_WORK) $(GO) test -short -race -count=1 ./...

# Written to a temporary file and renamed: make test's lanes run it side
# by side, and a go command reading a half-written file fails.
cli-work:
	@printf 'go 1.26.0\n\nuse (\n\t%s\n\t%s/cmd/ratelimiter\n)\n\nreplace github.com/goredisson/ratelimiter v0.1.0 => %s\n' \
	  $(CURDIR) $(CURDIR) $(CURDIR) > $(CLI_WORK_FILE).$$$$ && mv -f $(CLI_WORK_FILE).$$$$ $(CLI_WORK_FILE)

test-newest: deps-redis
	cp go.mod $(NEWEST_MOD)
	cp go.sum $(NEWEST_MOD:.mod=.sum)
	$(GO) get -modfile=$(NEWEST_MOD) github.com/redis/go-redis/v9@$(GO_REDIS_NEWEST)
	$(GO) test -modfile=$(NEWEST_MOD) -short -count=1 -p 1 ./...
	rm -f $(NEWEST_MOD) $(NEWEST_MOD:.mod=.sum)

# The other servers our users run (docs/operations.md, "Supported servers"), fetched
# and cached by scripts/servers.sh: Redis 6.2 and Valkey 9.1. On each: the
# core and CLI suites without the long tests (-short, side by side as
# test-newest and test-oldest are; the race detector ran above), the Redisson compatibility
# quick subset against 4.7.0 and 3.16.3, and Cluster and Sentinel with
# failover. The full suite runs on Debian's 7.0 above; `make test
# REDIS_SERVER=...` runs all of it on another build.
SERVERS ?= redis-6.2 valkey-9.1
COMPAT_QUICK := TestConfig$$|TestInterleavedAcquisitions|TestReleaseAcrossSides|TestExpiryAcrossSides|TestErrorsAgree|TestCombinedRecords
TOPOLOGY_TESTS := TestCluster$$|TestSentinel$$|TestFailoverCluster$$|TestFailoverSentinel$$
# go-redis's FailoverClusterClient is a client-side path; it runs on 7.0
# above, and the same failover runs here through the other two clients.
TOPOLOGY_SKIP := TestFailoverSentinel/failover-cluster-client
servers:
	bash scripts/servers.sh fetch

test-servers: deps servers cli-work
	@set -e; for s in $(SERVERS); do \
	  bin=$$(bash scripts/servers.sh bin $$s); shim=$$(bash scripts/servers.sh shim $$bin); \
	  echo "== $$s: $$($$bin --version)"; \
	  export PATH=$$shim:$$PATH REDIS_SERVER=$$bin REDIS_SENTINEL=$$shim/redis-sentinel; \
	  (cd cmd/ratelimiter && $(CLI_WORK) $(GO) test -short -count=1 -p 1 ./...) & cli=$$!; \
	  core=0; $(GO) test -short -count=1 -p 1 ./... || core=$$?; \
	  wait $$cli; [ $$core -eq 0 ]; \
	  COMPAT_VERSIONS=4.7.0,3.16.3 $(GO) test -count=1 -run '$(COMPAT_QUICK)' ./internal/compat; \
	  $(GO) test -count=1 -run '$(TOPOLOGY_TESTS)' -skip '$(TOPOLOGY_SKIP)' .; \
	done

# go.mod's go line is the oldest Go the core builds and passes with: the
# quick suite once more on that toolchain (the Go module proxy serves it).
# cmd/ratelimiter/, otel/, grpclimit/ and bench/ need Go 1.26 (their
# dependencies do).
GO_OLDEST ?= go1.25.5
test-oldest: deps-redis
	GOTOOLCHAIN=$(GO_OLDEST) $(GO) test -short -count=1 -p 1 ./...

# Envoy's rate-limit service (ENVOY_RATELIMIT, above), built once.
$(ENVOY_RATELIMIT):
	GOBIN=$(@D) GOFLAGS=-mod=mod $(GO) install github.com/envoyproxy/ratelimit/src/service_cmd@$(ENVOY_RATELIMIT_VERSION)

# The yardstick (bench/, its own module): this library beside Java Redisson
# 4.7.0, redis_rate (GCRA) and the classic algorithms on one throwaway
# redis-server (or BENCH_ARGS=--url=redis://host:port); markdown tables on
# stdout, SVG charts into docs/bench/. About 12 minutes on 2 cores (11 min
# 58 s on 2026-11-28; the service section alone, --service-only, 2 min 13 s).
bench: deps-redis deps-java $(ENVOY_RATELIMIT)
	bash internal/compat/build-peer.sh 4.7.0
	cd bench && $(WORK) $(GO) run . --charts ../docs/bench --envoy-ratelimit $(ENVOY_RATELIMIT) $(BENCH_ARGS)

# Every contender and measurement briefly (about two minutes); charts into
# /tmp/ratelimiter-bench-quick, the committed ones stay.
bench-quick: deps-redis deps-java $(ENVOY_RATELIMIT)
	bash internal/compat/build-peer.sh 4.7.0
	cd bench && $(WORK) $(GO) run . --quick --charts /tmp/ratelimiter-bench-quick --envoy-ratelimit $(ENVOY_RATELIMIT) $(BENCH_ARGS)

# docs/fairness.md's tables in one command: every fleet row (issue 19's
# equal and unequal demand, mixed sizes, WithForeignWaiters, Redisson
# beside Redisson; 6 runs of 30 s each, both Redisson versions), then the
# Go-only cost rows (1, 4 and 16 Clients, 60 rounds each). About two
# hours on 2 cores; run nothing else beside it. FLEET_ROWS keeps some
# rows (a regular expression over "version shape strategy").
fairness-table: deps
	FLEET_TABLE=1 $(GO) test -count=1 -timeout 4h -run TestFleetTable -v ./internal/compat
	for c in 1 4 16; do FAIRNESS_COST_CLIENTS=$$c FAIRNESS_COST_ROUNDS=$${FAIRNESS_COST_ROUNDS:-60} \
	  $(GO) test -count=1 -timeout 1h -run TestFairnessCostGoOnly -v . || exit 1; done

# Ten minutes of Go and Java Redisson 4.7.0 on three limiters with faults
# (internal/compat TestSoak); the test suite runs it for 60 s.
soak: deps
	SOAK_DURATION=$${SOAK_DURATION:-10m} $(GO) test -count=1 -timeout 20m -run TestSoak -v ./internal/compat

# The published modules (core, otel, grpclimit, the CLI) installed as a
# stranger would: from a module proxy built from HEAD (file://), in a new
# module, no workspace, no replace; the program built and run, the CLI
# installed with go install ...@version and run.
install-check: deps-redis
	bash scripts/install-check.sh

vet:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	@big=$$(git ls-files -z | xargs -0 -r stat -c '%s %n' 2>/dev/null | awk '$$1 > 1048576 { print $$2 }'); \
	  if [ -n "$$big" ]; then echo "tracked files over 1 MB (build outputs belong in .gitignore):"; echo "$$big"; exit 1; fi
	$(GO) vet ./...
	cd cmd/ratelimiter && $(WORK) $(GO) vet ./...
	cd otel && $(WORK) $(GO) vet ./...
	cd grpclimit && $(WORK) $(GO) vet ./...
	cd bench && $(WORK) $(GO) vet ./...
	cd internal/modproxy && $(GO) vet ./...

# staticcheck's default checks, test files included. The CLI is checked in
# its own workspace (cli-work), against the dependencies its published
# build uses, as its tests run.
lint: deps-staticcheck cli-work
	$(STATICCHECK) ./...
	cd cmd/ratelimiter && $(CLI_WORK) $(STATICCHECK) ./...
	cd otel && $(WORK) $(STATICCHECK) ./...
	cd grpclimit && $(WORK) $(STATICCHECK) ./...
	cd bench && $(WORK) $(STATICCHECK) ./...
	cd internal/modproxy && $(STATICCHECK) ./...

deps: deps-redis deps-java deps-prometheus peer

# Installs staticcheck $(STATICCHECK_VERSION) when $(STATICCHECK) is missing
# or another version (read from the binary's build info).
deps-staticcheck:
	@have=$$($(GO) version -m $(STATICCHECK) 2>/dev/null | awk '$$1 == "mod" && $$2 == "honnef.co/go/tools" { print $$3 }'); \
	if [ "$$have" != "$(STATICCHECK_VERSION)" ]; then \
	  echo "installing staticcheck $(STATICCHECK_VERSION) into $(TOOLS)"; \
	  GOBIN=$(TOOLS) $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION); \
	fi

deps-redis:
	@missing=""; \
	for b in redis-server:redis-server redis-sentinel:redis-sentinel redis-cli:redis-tools valgrind:valgrind cc:gcc; do \
	  command -v $${b%%:*} >/dev/null 2>&1 || missing="$$missing $${b##*:}"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "installing$$missing"; \
	  [ -f $(APT_UPDATED) ] || { $(SUDO) apt-get update -qq && touch $(APT_UPDATED); }; \
	  $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	fi
	@redis-server --version

# Prometheus 2.42 and promtool (Debian's package): the CLI's exporter tests
# run a real server against the exporter and check deploy/prometheus's rules.
deps-prometheus:
	@missing=""; \
	for b in prometheus promtool; do command -v $$b >/dev/null 2>&1 || missing=prometheus; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing $$missing"; \
	  [ -f $(APT_UPDATED) ] || { $(SUDO) apt-get update -qq && touch $(APT_UPDATED); }; \
	  $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	fi

deps-java:
	@missing=""; \
	command -v javac >/dev/null 2>&1 || missing="$$missing openjdk-17-jdk-headless"; \
	command -v mvn >/dev/null 2>&1 || missing="$$missing maven"; \
	if [ -n "$$missing" ]; then \
	  echo "installing$$missing"; \
	  [ -f $(APT_UPDATED) ] || { $(SUDO) apt-get update -qq && touch $(APT_UPDATED); }; \
	  $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	fi

# Builds the Java Redisson peers (all four versions) so that Maven's
# downloads happen here, not inside a test's timeout.
peer: deps-java
	bash internal/compat/build-peer.sh

# The CLI for linux, darwin and windows on amd64 and arm64, into dist/
# (ignored): goreleaser (.goreleaser.yaml) builds each binary reproducibly
# (-trimpath, no timestamps) stamped with its version and commit
# (ratelimiter --version), archives it, writes a CycloneDX SBOM of each
# binary with cyclonedx-gomod and a SHA-256 checksums file. A snapshot
# (v0.1.1-devel+<commit> after v0.1.0); VERSION=v0.1.0 on the commit tagged
# v0.1.0, with a clean tree, builds the release (CONTRIBUTING.md,
# "Releasing"). The binaries build in the CLI's test workspace (make
# cli-work): the core from this checkout, the go-redis go install
# ...@version builds with. Both tools are pinned here, and only here, and
# built once with go install into a cache kept between runs.
GORELEASER_VERSION := v2.15.1
CYCLONEDX_GOMOD_VERSION := v1.10.0
GORELEASER := $(TOOLS)/goreleaser-$(GORELEASER_VERSION)/goreleaser
CYCLONEDX_GOMOD := $(TOOLS)/cyclonedx-gomod-$(CYCLONEDX_GOMOD_VERSION)/cyclonedx-gomod
# goreleaser versions the build from a tag: the core's (v0.1.0), never a
# satellite's on the same commit (otel/v0.1.0); v0.0.0 before the first.
DIST_TAG = $(or $(VERSION),$(shell git describe --tags --abbrev=0 --match 'v[0-9]*' 2>/dev/null),v0.0.0)
# goreleaser reads the remote's URL and, without one, stamps the commit as
# "none": a checkout without a remote (a worktree of a local clone) lends
# it its own directory as origin, for goreleaser's git calls alone.
DIST_GIT_ENV = $(if $(shell git remote),,GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=remote.origin.url GIT_CONFIG_VALUE_0=$(CURDIR))
DIST_RUN = PATH=$(dir $(CYCLONEDX_GOMOD)):$$PATH GOWORK=$(CLI_WORK_FILE) GORELEASER_CURRENT_TAG=$(DIST_TAG) \
  $(DIST_GIT_ENV) $(GORELEASER) release --clean
# make dist-host: the same for this machine's GOOS and GOARCH alone (make
# test's snapshot), from a copy of .goreleaser.yaml with goos and goarch
# narrowed.
DIST_HOST_CONFIG := $(or $(TMPDIR),/tmp)/ratelimiter-goreleaser-host-$(shell id -u).yaml
HOST_GOOS = $(shell $(GO) env GOOS)
HOST_GOARCH = $(shell $(GO) env GOARCH)

.PHONY: dist dist-host dist-check
dist: cli-work $(GORELEASER) $(CYCLONEDX_GOMOD)
	$(DIST_RUN) $(if $(VERSION),--skip=publish,--snapshot)

dist-host: cli-work $(GORELEASER) $(CYCLONEDX_GOMOD)
	sed -e 's/^    goos: .*/    goos: [$(HOST_GOOS)]/' -e 's/^    goarch: .*/    goarch: [$(HOST_GOARCH)]/' .goreleaser.yaml > $(DIST_HOST_CONFIG)
	grep -q '^    goos: \[$(HOST_GOOS)\]$$' $(DIST_HOST_CONFIG) && grep -q '^    goarch: \[$(HOST_GOARCH)\]$$' $(DIST_HOST_CONFIG)
	$(DIST_RUN) -f $(DIST_HOST_CONFIG) $(if $(VERSION),--skip=publish,--snapshot)

# Checks what make dist or make dist-host left in dist/
# (scripts/dist-check.sh): the checksums verify, every binary has its
# archive and SBOM, this machine's binary prints the version and the
# commit, and this machine's target built again (make dist-host) from a
# clone of HEAD elsewhere has the same checksums.
dist-check:
	bash scripts/dist-check.sh

$(GORELEASER):
	GOBIN=$(@D) $(GO) install github.com/goreleaser/goreleaser/v2@$(GORELEASER_VERSION)

$(CYCLONEDX_GOMOD):
	GOBIN=$(@D) $(GO) install github.com/CycloneDX/cyclonedx-gomod/cmd/cyclonedx-gomod@$(CYCLONEDX_GOMOD_VERSION)
