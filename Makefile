# Sluice: `make run` runs the main demo, `make test` the test suite.
GO ?= go
BIN := bin/sluice

.PHONY: build run stop sim test test-python smoke eval vet bench bench-wan dist clean

build:
	$(GO) build -o $(BIN) ./cmd/sluice

# The main job: a local server on SQLite, two local agents, a real
# transfer with progress; the service stays up for `sluice status`.
run: build
	BIN=$(BIN) bash scripts/demo.sh

# Stop what `make run` started.
stop:
	@d=$$(cat $${SLUICE_DEMO_STATE:-$$HOME/.sluice-demo} 2>/dev/null) && [ -f "$$d/pids" ] && \
		kill $$(cat "$$d/pids") 2>/dev/null; echo "stopped the demo service ($$d)"; \
		rm -f $${SLUICE_DEMO_STATE:-$$HOME/.sluice-demo}

# The simulator demo: replay the SC'15 traces under the baselines, SEAL and
# seal+ and print the Figure 3 comparison.
sim: build
	$(BIN) sim fig2
	$(BIN) sim compare --trace 25,45,60 --schedulers basecc1,basecc2,basecc4,basevary,seal,seal+

test: build
	gofmt -l . | tee /dev/stderr | (! read -r _)
	$(GO) vet ./...
	# The dashboard's browser test leaves its screenshots in test-output/
	# (CI artifacts).
	TEST_OUTPUT=$(CURDIR)/test-output/web $(GO) test -count=1 $$($(GO) list ./... | grep -v '/wan$$')
	# The emulated WAN's validation holds real TCP to the profile within
	# a few percent: alone, so that no other package takes its CPU, and
	# after a sync, so that the kernel's writeback of what the tests
	# before it wrote (servers' files, stores) does not either (pings
	# came out 1.5 ms long while it flushed).
	sync
	$(GO) test -count=1 ./wan
	# The Policy Service's allocations under 1,000 concurrent clients, with
	# the race detector.
	$(GO) test -race -count=1 ./policy
	$(MAKE) test-python
	BIN=$(BIN) bash scripts/api-fuzz.sh
	# The Debian package installed into an empty root, and its systemd
	# units verified (a few seconds).
	BIN=$(BIN) bash scripts/dist-check.sh
	$(MAKE) smoke

# The Python SDK (python/): its wheel, built and installed into the venv
# scripts/python-sdk-deps.sh makes (.cache/py-venv), then its tests against
# a real $(BIN) serve with two agents, the example notebook among them.
# Skips, saying why, without the venv. SLUICE_UPDATE_NOTEBOOK=1 writes the
# executed notebook back to python/examples/.
PYVENV := .cache/py-venv
test-python: build
	@if ! $(PYVENV)/bin/python -c 'import httpx, httpx_sse, tqdm, fsspec, pytest, nbclient, ipykernel, build, hatchling' 2>/dev/null; then \
		echo "test-python: SKIPPED: no Python venv with the SDK's test packages in $(PYVENV) (bash scripts/python-sdk-deps.sh makes it)" >&2; \
		exit 0; \
	fi; \
	set -e; rm -rf .cache/py-dist; \
	out=$$($(PYVENV)/bin/python -m build --wheel --no-isolation --outdir .cache/py-dist python 2>&1) || { echo "$$out" >&2; exit 1; }; \
	$(PYVENV)/bin/python -m pip install -q --force-reinstall --no-deps .cache/py-dist/sluice-*.whl; \
	cd python && SLUICE_BIN=$(CURDIR)/$(BIN) SLUICE_WHEEL=1 ../$(PYVENV)/bin/python -m pytest -q -p no:cacheprovider tests

# The emulated testbed's smoke run: a small trace under two schedulers on
# real bytes (every file verified, or it fails).
smoke: build
	$(BIN) testbed compare --profile sc15-mini --trace smoke --schedulers basecc2,seal --json >/dev/null

# The full comparison on real bytes, written to docs/results/testbed/.
eval: build
	BIN=$(BIN) bash scripts/eval.sh

bench: build
	bash bench/sim.sh
	bash bench/transfer.sh
	BIN=$(BIN) bash bench/submit.sh
	bash bench/recursive.sh

# Throughput against streams over the emulated WAN and the forwarder's
# ceiling (root; docs/results/wan.md).
bench-wan: build
	BIN=$(BIN) bash bench/wan.sh

# Release archives and Debian packages for linux/amd64 and linux/arm64 in
# bin/dist/ (scripts/dist.sh; dist/ holds the units, sluice.toml, nfpm.yaml).
dist:
	bash scripts/dist.sh

clean:
	rm -rf bin
