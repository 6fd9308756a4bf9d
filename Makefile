# corral — make targets. `make test` is what CI runs (.ci/run).
GO ?= go

.PHONY: test vet bench demo generate e2e e2e-faults e2e-k8s manifests image release sim fuzz

# The release this tree builds: the file VERSION, which the chart's appVersion repeats (a test
# and release/release.sh check that they agree).
VERSION ?= $(shell cat VERSION)

test: vet
	$(GO) test -race -count=1 ./...

vet:
	$(GO) vet ./...

# Fuzzing: every fuzz target of the module (go test -list '^Fuzz'), one after the other for
# FUZZTIME each (go test -fuzz takes one target at a time); 19 targets, so about 19 × FUZZTIME
# plus one instrumented build per package. Their seed corpora (testdata/fuzz/<FuzzName>/) run
# as ordinary tests in `make test`; an input that fails is written there by the go command,
# to be kept as a regression once fixed. The go command also minimizes every input that finds
# new coverage, for up to FUZZMINIMIZETIME each; its default, 60 s, would spend a short run on
# that instead of fuzzing. Go 1.26's coordinator can end a run at its FUZZTIME deadline with
# "context deadline exceeded" and no failing input (go.dev/issue/75804, fixed in Go 1.27): such
# a run is reported and passes; a run that wrote a failing input, or failed otherwise, fails.
FUZZTIME ?= 10s
FUZZMINIMIZETIME ?= 5s
fuzz:
	@set -e; \
	marker=$$(mktemp); log=$$(mktemp); trap 'rm -f "$$marker" "$$log"' EXIT; \
	for dir in $$($(GO) list -f '{{$$d := .Dir}}{{range .TestGoFiles}}{{$$d}}/{{.}} {{end}}{{range .XTestGoFiles}}{{$$d}}/{{.}} {{end}}' ./... | \
			xargs -r grep -l '^func Fuzz' | xargs -r -n1 dirname | sort -u); do \
		for target in $$($(GO) test -list '^Fuzz' $$dir | grep '^Fuzz'); do \
			echo "fuzz: $$target in $$dir for $(FUZZTIME)"; \
			touch "$$marker"; \
			if $(GO) test -run '^$$' -fuzz "^$$target\$$" -fuzztime $(FUZZTIME) -fuzzminimizetime $(FUZZMINIMIZETIME) $$dir >"$$log" 2>&1; then \
				cat "$$log"; \
			else \
				cat "$$log"; \
				if [ -z "$$(find $$dir/testdata/fuzz/$$target -type f -newer "$$marker" 2>/dev/null)" ] && \
						tail -n 5 "$$log" | grep -q '^    context deadline exceeded$$'; then \
					echo "fuzz: $$target: ended by go.dev/issue/75804 at its deadline, no failing input: passes"; \
				else \
					exit 1; \
				fi; \
			fi; \
		done; \
	done

# Benchmarks: ratios measured in one run are what count (see docs/performance.md).
bench:
	$(GO) test -run '^$$' -bench . -benchmem -count 1 ./fill ./ring ./transport .

demo:
	$(GO) run ./cmd/corral demo

# End-to-end tests: real corral serve processes on loopback, signals, a real browser, a real
# Jaeger (e2e/jaeger/build.sh builds it once per version into $HOME/.cache/corral-e2e); then the
# Kubernetes tests.
e2e:
	e2e/jaeger/build.sh >/dev/null
	cd e2e && $(GO) test -race -count=1 ./...
	$(MAKE) e2e-faults
	$(MAKE) e2e-k8s

# The Docker failure suite of issue 10 (e2e/faults, its own module): builds the image, runs
# corral serve containers behind one network alias with a counting origin, kills, pauses,
# partitions, restarts and scales them under load, prints the results table and writes it to
# e2e/faults/RESULTS.md; about 6 minutes on 2 cores. Skips without Docker, fails when CI is set.
e2e-faults:
	cd e2e/faults && $(GO) test -count=1 -timeout 20m -v .

# The chart and k8s:// discovery on Kubernetes (e2e/k8s, its own module). build.sh builds the
# control plane, the node's parts (kubelet, kube-proxy, CoreDNS), kubectl and helm from Go
# modules once per version into $HOME/.cache/corral-e2e (see e2e/k8s/node/doc.go for the cold
# times; nothing warm). First the chart against a control plane alone (about a minute; the tests
# that run containers need Docker); then e2e/k8s/node: a real node (kubelet, Debian's
# containerd, runc and CNI plugins, CoreDNS, kube-proxy) that runs the chart in server and
# library mode under load through rollouts, scaling, a drain and crashes, and prints the
# figures of every scenario (a few minutes warm; needs root). Without what they need the tests
# skip; with CI set they fail.
e2e-k8s:
	e2e/k8s/build.sh >/dev/null
	cd e2e/k8s && $(GO) test -race -count=1 -timeout 15m .
	cd e2e/k8s && $(GO) test -race -count=1 -timeout 40m -v ./node

# Rewrites manifests/corral.yaml from the chart (TestManifests keeps them equal).
manifests:
	e2e/k8s/build.sh >/dev/null
	cd e2e/k8s && $(GO) test -count=1 -run '^TestManifests$$' . -update

# The container image of this machine's architecture: a static binary in an image built FROM
# scratch, run as non-root, tagged as the chart names it by default (corral:<appVersion>).
IMAGE ?= corral:$(VERSION)
image:
	mkdir -p bin/image
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '-s -w -X main.version=$(VERSION)' -o bin/image/corral ./cmd/corral
	cp Dockerfile bin/image/Dockerfile
	docker build -t $(IMAGE) bin/image

# A release (release/release.sh): static binaries for linux/amd64 and linux/arm64 with the
# version stamped, their CycloneDX SBOMs, an image of each built FROM scratch with the
# Dockerfile and saved as a tarball, SHA256SUMS, and with SIGNING_KEY (an SSH private key) its
# signature; in out/release/$(VERSION). docs/releasing.md says how to check and load them.
release:
	GO=$(GO) VERSION=$(VERSION) release/release.sh

# Regenerates transport/peerpb from peer.proto: needs protoc (Debian: protobuf-compiler),
# protoc-gen-go and protoc-gen-go-grpc (see transport/peerpb/generate.go for the versions).
generate:
	$(GO) generate ./transport/...

# Side by side with otter, groupcache, Redis and a bare gRPC echo (e2e/bench, its own module),
# and corral serve with Varnish, nginx and Redis under wrk and redis-benchmark: prints one table
# and writes it to e2e/bench/RESULTS.md; about 6 minutes on 2 cores. Not part of `make test`.
# Installs what is missing from Debian's packages first (each program is looked for, so a
# second run installs nothing). Debian starts nginx's and Varnish's own services on install
# where an init system runs; the benchmark runs instances of its own on free loopback ports.
BENCH_PROGRAMS = redis-server:redis-server redis-benchmark:redis-tools varnishd:varnish nginx:nginx wrk:wrk
.PHONY: bench-compare
bench-compare:
	@missing=""; for p in $(BENCH_PROGRAMS); do \
		command -v $${p%%:*} >/dev/null 2>&1 || PATH="$$PATH:/usr/sbin:/sbin" command -v $${p%%:*} >/dev/null 2>&1 || missing="$$missing $${p#*:}"; \
	done; \
	if [ -n "$$missing" ]; then \
		echo "bench-compare: installing$$missing"; \
		SUDO=$$([ "$$(id -u)" = 0 ] || echo sudo); \
		$$SUDO apt-get update -qq && $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	fi
	cd e2e/bench && PATH="$$PATH:/usr/sbin:/sbin" $(GO) run . -out RESULTS.md

# The deterministic simulator (package sim): SIM_HISTORIES seeded cluster histories in virtual
# time, in one process per core; the last line is "sim: N histories, M violations".
# SIM_SEED=N replays history N and prints its trace. The histories run with GOGC=400 (a
# history's heap is small and short-lived): 1,212 histories a minute here against 918 at the
# default GOGC.
SIM_HISTORIES ?= 2000
SIM_FIRST ?= 1
SIM_NODES ?= 0
sim:
	mkdir -p bin
	$(GO) test -c -o bin/sim.test ./sim
	@if [ -n "$(SIM_SEED)" ]; then \
		GOMAXPROCS=1 bin/sim.test -test.run '^TestSim$$' -test.v -sim.seed=$(SIM_SEED); \
	else \
		bin/sim.test -test.run '^TestSimScale$$' -test.timeout 20m -sim.scale=50,100 | grep '^sim-scale' && \
		GOGC=$${GOGC:-400} bin/sim.test -test.run '^TestSim$$' -test.timeout 60m -sim.histories=$(SIM_HISTORIES) -sim.first=$(SIM_FIRST) -sim.nodes=$(SIM_NODES) -sim.shards=$$(nproc); \
	fi
