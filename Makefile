# The README's test command is `make test`; .ci/run calls it.

GO ?= go

.PHONY: test test-deps bench generate

# test vets the benchmark module and runs its tests (which compiles the benchmarks without running them),
# then vets and tests the main module with the race detector. It needs nothing but Go.
test: test-deps
	cd bench && $(GO) vet ./...
	cd bench && $(GO) test -run . -count=1 ./...
	$(GO) vet ./...
	$(GO) test -race -count=1 ./...

# test-deps starts what the tests need besides Go. Nothing yet: the Valkey server for the store/valkey
# integration tests goes here.
test-deps:

# bench runs the benchmarks, Loom beside its peers (see bench/).
bench:
	cd bench && $(GO) test -run '^$$' -bench . -benchmem ./...

# generate regenerates the tokenizer's vocabularies, Unicode tables and test vectors from npm's tiktoken
# (needs Node.js and npm; see scripts/gen-tokenizer).
generate:
	$(GO) generate ./tokenizer
