# Sluice: `make run` runs the main demo, `make test` the test suite.
GO ?= go
BIN := bin/sluice

.PHONY: build run test vet bench clean

build:
	$(GO) build -o $(BIN) ./cmd/sluice

# For now the main job is the simulator: replay the SC'15 traces under the
# baselines, SEAL and seal+ and print the Figure 3 comparison.
run: build
	$(BIN) sim fig2
	$(BIN) sim compare --trace 25,45,60 --schedulers basecc1,basecc2,basecc4,basevary,seal,seal+

test:
	gofmt -l . | tee /dev/stderr | (! read -r _)
	$(GO) vet ./...
	$(GO) test -count=1 ./...

bench:
	bash bench/sim.sh
	bash bench/transfer.sh

clean:
	rm -rf bin
