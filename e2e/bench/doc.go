// Command bench measures corral side by side with what users already run — otter in process,
// groupcache, Redis (through go-redis) and a bare gRPC echo of corral's own peer message — in
// one run on one machine, and reports ratios: absolute times on a shared machine are noise,
// ratios measured in one run are not.
//
// # Usage
//
//	make bench-compare                 # from the repository root; installs redis-server if absent
//	cd e2e/bench && go run . -out RESULTS.md
//
// It prints one table and writes it as Markdown to -out. Everything runs on 127.0.0.1.
//
// # How it runs
//
// The command is a driver: it measures nothing itself. It starts redis-server on a free
// loopback port, and re-executes its own binary as worker processes (CORRAL_BENCH_WORKER=1 in
// the environment), to which it sends one JSON command per line on stdin and from which it
// reads one JSON answer per line on stdout (see worker.go). Every cache node — corral's and
// groupcache's alike — is a worker process, so both systems cross the same process boundary
// and a crash is a real SIGKILL. groupcache keeps global state (its group registry and its
// one peer picker), which is one more reason for one process per node.
//
// Workers c0, c1 and c2 each run two corral nodes: one in a cluster with the near cache off
// (so every remote Get crosses the wire) and one in a cluster with the default config.
// Workers g0, g1 and g2 are one groupcache node each, joined by its HTTPPool. The bare gRPC
// echo server and the raw TCP floor (tcpfloor.go) live in c1, beside the corral owner they
// are compared with; the Redis, echo and TCP clients run in c0, beside the corral caller. A
// worker exits when its stdin closes, so no process outlives the driver.
//
// Step batch (rows 9 and 9b, batch.go, on the bed after row 3) reads a page of 100 keys: as
// remote hits, through corral's GetMany, 100 concurrent corral Gets, 100 concurrent groupcache
// Gets and one Redis MGET; and cold, counting the loader calls (database queries) of corral
// with a batch loader and with a LoadFunc, groupcache, and Redis cache-aside (MGET, one query
// for the misses, SETs), for one caller and for 10 callers on each node at once.
//
// Steps http and resp (rows 7 and 8, last, once the workers have stopped) measure `corral
// serve` as a server: its HTTP front against Varnish and nginx under wrk (one hot key at 1 and
// 64 connections; random keys through a node of a 3-node cluster against a node alone), and its
// Redis protocol front against redis-server under redis-benchmark. Each builds cmd/corral and
// starts every server as a process of its own on free loopback ports, beside an origin in the
// driver; the load generators run beside them, as their users run them. They need varnishd,
// nginx, wrk, redis-server and redis-benchmark (Debian: varnish, nginx, wrk, redis-server,
// redis-tools; make bench-compare installs them).
//
// Flags: -out FILE (default RESULTS.md), -steps local,remote,stampede,batch,crash,memory,ring,http,resp
// (a subset), -callers 1,16,64 (the remote-hit rows' concurrencies), -quick (every step briefly,
// to check the harness), -profile DIR (CPU profiles and execution traces of the caller and
// owner processes during corral's and the echo's remote-hit runs), -syscalls (each remote-hit
// run's read and write system calls per Get, per process, from /proc/PID/io, on stderr),
// -tls (corral's peers on mutual TLS, with a CA and certificates made for the run; the
// others stay plaintext).
//
// The tests (go test -race ./...) check the pieces — the Redis starter, the worker launcher,
// groupcache and corral nodes as processes, the stampede counters — and run the whole
// harness briefly; those that need redis-server skip when it is not installed.
//
// Every load loop is bounded both in count and in time; see plan in main.go.
package main
