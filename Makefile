# The README's test command is `make test`; .ci/run calls it.

GO ?= go

.PHONY: test test-fast test-deps bench generate

# test vets the benchmark module and runs its tests (which compiles the benchmarks without running them),
# vets and runs the SDK conformance tests (internal/sdktest, a module of its own so that the OpenAI and
# Anthropic SDKs stay out of the library's go.mod), then vets and tests the main module with the race
# detector, and runs the allocation tests without it (under it sync.Pool drops values on purpose, so they
# skip there). The Valkey tests start their own servers on
# free loopback ports (internal/valkeytest); LOOM_REQUIRE_VALKEY=1 makes them fail, not skip, without one.
test: test-deps
	cd bench && $(GO) vet ./...
	cd bench && $(GO) test -run . -count=1 ./...
	cd internal/sdktest && $(GO) vet ./...
	cd internal/sdktest && $(GO) test -count=1 ./...
	$(GO) vet ./...
	LOOM_REQUIRE_VALKEY=1 $(GO) test -race -count=1 ./...
	$(GO) test -count=1 -run 'AllocatesNothing|DoesNotAllocate' ./...

# test-fast runs the main module's tests once without the race detector, vet or the benchmark module: the
# quick loop while working (the Valkey tests still start their own servers).
test-fast: test-deps
	$(GO) test -count=1 ./...

# test-deps installs what the tests need besides Go: a Valkey-protocol server binary (Debian's
# redis-server when no valkey-server or redis-server is installed).
test-deps:
	bash scripts/ensure-valkey.sh

# bench runs the benchmarks, Loom beside its peers (see bench/).
bench:
	cd bench && $(GO) test -run '^$$' -bench . -benchmem ./...

# generate regenerates the tokenizer's vocabularies, Unicode tables and test vectors from npm's tiktoken
# (needs Node.js and npm; see scripts/gen-tokenizer).
generate:
	$(GO) generate ./tokenizer
