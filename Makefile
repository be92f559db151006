# The README's test command is `make test`; .ci/run calls it.

GO ?= go
GOFMT ?= $(shell $(GO) env GOROOT)/bin/gofmt
# staticcheck, pinned; `go run` fetches and builds it once (the module and build caches keep it).
STATICCHECK_VERSION ?= v0.8.2
STATICCHECK ?= $(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)
# The modules of the repository: the library, the benchmarks, the SDK conformance tests and the inspector
# page's browser test.
MODULES := . bench internal/sdktest internal/browsertest

.PHONY: test test-fast test-full test-deps lint nocgo bench generate screenshot

# test checks the formatting and runs staticcheck on every module (lint), builds, vets and tests what
# depends on cgo without it (nocgo), vets the benchmark module and runs its tests (which compiles the
# benchmarks without running them), vets and runs the SDK conformance tests (internal/sdktest, a module of
# its own so that the OpenAI and Anthropic SDKs stay out of the library's go.mod) and the inspector page's
# test in headless Chromium (internal/browsertest, its own module for chromedp), then vets the main
# module and tests it twice: every test of every package without the race detector, at full size (the
# allocation tests among them: under the detector sync.Pool drops values on purpose, so they skip there),
# then the packages in RACE_PKGS with it, where the single-goroutine property sweeps run a tenth of their
# rounds (see each package's race_on_test.go). The Valkey tests start their own servers on free loopback
# ports (internal/valkeytest); LOOM_REQUIRE_VALKEY=1 makes them fail, not skip, without one.
test: test-deps lint nocgo
	cd bench && $(GO) vet ./...
	cd bench && $(GO) test -run . -count=1 ./...
	cd internal/sdktest && $(GO) vet ./...
	cd internal/sdktest && $(GO) test -count=1 ./...
	cd internal/browsertest && $(GO) vet ./...
	cd internal/browsertest && $(GO) test -count=1 ./...
	$(GO) vet ./...
	LOOM_REQUIRE_VALKEY=1 $(GO) test -count=1 -timeout $(TEST_TIMEOUT) ./...
	LOOM_REQUIRE_VALKEY=1 $(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) $(RACE_PKGS)

# TEST_TIMEOUT bounds one package's test binary: go test's default of 10 minutes was what failed on a
# 2-core machine at a load average of 30 to 44 (the assembler's race run, before its sweeps were cut); a
# hang still fails.
TEST_TIMEOUT ?= 20m

# NORACE_PKGS are the packages whose code and tests start no goroutine and hold no shared state (the
# root's types, the collection vocabulary, the chunkers' test helpers, the retrieval evaluation, ingestion's
# pure functions, the image-size, stop-word and XML-text helpers, store URLs, the prompt-cache simulation
# and its script, which play one conversation in one goroutine): the race detector has
# nothing to watch there, and the run without it tests them. Every other package, a new one included, is
# in RACE_PKGS.
MODULE := github.com/context-loom/loom
NORACE_PKGS := $(MODULE) $(addprefix $(MODULE)/,collection chunker/internal/chunktest eval ingest internal/imagesize internal/stopword internal/xmltext store/storeurl internal/cachesim scripts/cachesim)
RACE_PKGS = $(filter-out $(NORACE_PKGS),$(shell $(GO) list ./...))

# lint fails on any file gofmt would change, in any module, and on what staticcheck reports.
lint:
	@unformatted="$$($(GOFMT) -l .)"; if [ -n "$$unformatted" ]; then echo "gofmt -l: not formatted:"; echo "$$unformatted"; exit 1; fi
	for m in $(MODULES); do (cd $$m && $(STATICCHECK) ./...) || exit 1; done

# nocgo proves the pure-Go build: everything builds and vets with CGO_ENABLED=0 (the tree-sitter code
# chunker, chunker/code, is then empty and left out), and the command, the one package that differs
# without cgo, passes its tests: its code strategy falls back to plain text and says so, and loom is a
# static binary (TestBuild_WithoutCgoIsStatic). The other packages are pure Go: the main test run covers
# them, the plain-text code strategy included (chunker's TestCodeText_*, engine's and server's
# *CodeWithoutAParserSaysSo).
nocgo:
	CGO_ENABLED=0 $(GO) build ./...
	CGO_ENABLED=0 $(GO) vet ./...
	CGO_ENABLED=0 $(GO) test -count=1 ./cmd/loom/...

# test-fast runs the main module's tests once without the race detector, vet or the benchmark module: the
# quick loop while working (the Valkey tests still start their own servers).
test-fast: test-deps
	$(GO) test -count=1 ./...

# test-full runs the main module's tests without the race detector at the sizes a plain run cuts down
# (LOOM_FULL_SWEEPS=1: the code chunker's fuzz seeds filled to 64 KB, not 16 KB), for a nightly run.
test-full: test-deps
	LOOM_FULL_SWEEPS=1 LOOM_REQUIRE_VALKEY=1 $(GO) test -count=1 ./...

# test-deps installs what the tests need besides Go: a Valkey-protocol server binary (Debian's
# redis-server when no valkey-server or redis-server is installed) and a headless Chromium for the
# inspector's browser test (Debian's chromium; where it cannot be installed, that test skips and says why).
test-deps:
	bash scripts/ensure-valkey.sh
	bash scripts/ensure-chromium.sh

# screenshot regenerates docs/inspector.png, the README's picture of the inspector, from the browser test.
screenshot: test-deps
	cd internal/browsertest && $(GO) test -count=1 -run TestInspector -update-screenshot ./...

# bench runs the benchmarks, Loom beside its peers (see bench/).
bench:
	cd bench && $(GO) test -run '^$$' -bench . -benchmem ./...

# generate regenerates the tokenizer's vocabularies, Unicode tables, test vectors and model map from npm's tiktoken
# (needs Node.js and npm; see scripts/gen-tokenizer).
generate:
	$(GO) generate ./tokenizer
