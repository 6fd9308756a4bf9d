package main

import (
	"bytes"
	"context"
	"net"
	"strconv"
	"strings"
	"testing"
)

// What a person typing at the CLI sees: -h prints the usage on stdout and exits 0, whatever
// the command; a bad value says what the flag takes; an error says "corral" once.
func TestCLIHelpAndErrors(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	busyPort := strconv.Itoa(busy.Addr().(*net.TCPAddr).Port)

	tests := []struct {
		name       string
		args       []string
		code       int
		stdout     []string // each must be in stdout
		stderr     []string // each must be in stderr
		notStderr  string   // must not be in stderr
		noStdout   bool
		stderrOnly bool // stderr is one line
	}{
		{name: "demo --help", args: []string{"demo", "--help"}, code: 0, stdout: []string{"Usage: corral demo", "-latency duration"}},
		{name: "serve -h", args: []string{"serve", "-h"}, code: 0, stdout: []string{"Usage: corral serve", "-ttl duration"}},
		{name: "inspect --help", args: []string{"inspect", "--help"}, code: 0, stdout: []string{"Usage: corral inspect", "-addr string"}},
		{name: "a duration without a unit", args: []string{"serve", "--ttl", "30"}, code: 1, noStdout: true, stderrOnly: true,
			stderr: []string{`corral serve: --ttl "30": not a duration: a number with a unit, such as 30s`, "corral serve -h lists the flags"}},
		{name: "a port that is not a number", args: []string{"serve", "--http-port=eighty"}, code: 1, noStdout: true, stderrOnly: true,
			stderr: []string{`--http-port "eighty": not an integer`}},
		{name: "a demo latency without a unit", args: []string{"demo", "-latency", "50"}, code: 1, noStdout: true, stderrOnly: true,
			stderr: []string{`corral demo: --latency "50": not a duration`}},
		{name: "an unknown flag", args: []string{"serve", "--nope"}, code: 1, noStdout: true, stderrOnly: true,
			stderr: []string{"flag provided but not defined: -nope", "corral serve -h lists the flags"}},
		{name: "the library's error after the command's name", code: 1,
			args:   []string{"serve", "--bind", "127.0.0.1", "--gossip-port", busyPort, "--peer-port", "0", "--http-port", "0"},
			stderr: []string{"corral serve: membership: "}, notStderr: "corral: "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := run(context.Background(), tt.args, &stdout, &stderr); code != tt.code {
				t.Fatalf("corral %q: exit %d, want %d\nstdout: %s\nstderr: %s", tt.args, code, tt.code, &stdout, &stderr)
			}
			for _, want := range tt.stdout {
				if !strings.Contains(stdout.String(), want) {
					t.Errorf("stdout lacks %q:\n%s", want, &stdout)
				}
			}
			for _, want := range tt.stderr {
				if !strings.Contains(stderr.String(), want) {
					t.Errorf("stderr lacks %q:\n%s", want, &stderr)
				}
			}
			if tt.notStderr != "" && strings.Contains(stderr.String(), tt.notStderr) {
				t.Errorf("stderr has %q:\n%s", tt.notStderr, &stderr)
			}
			if tt.noStdout && stdout.Len() > 0 {
				t.Errorf("stdout: %s", &stdout)
			}
			if tt.stderrOnly && strings.Count(stderr.String(), "\n") != 1 {
				t.Errorf("stderr is not one line (the usage buries the error):\n%s", &stderr)
			}
		})
	}
}

// serve -h lists every route the API serves and every command of the Redis protocol front.
func TestServeHelpListsTheAPI(t *testing.T) {
	var stdout bytes.Buffer
	if code := run(context.Background(), []string{"serve", "-h"}, &stdout, &stdout); code != 0 {
		t.Fatalf("exit %d", code)
	}
	for _, want := range []string{
		"GET    /v1/groups/{group}/keys/{key}", "PUT    /v1/groups/{group}/keys/{key}",
		"DELETE /v1/groups/{group}/keys/{key}", "GET    /v1/groups/{group}/keys?key=a&key=b",
		"POST   /v1/groups/{group}/keys:batch", "?peek", "?lease=", "?ttl=", "DELETE /v1/tags/{tag}",
		"GET    /v1/cluster", "/metrics", "/healthz", "/readyz", "/debug/corral", "/debug/pprof/", "Content-Type",
		"GET (reads through --origin", "MGET", "SET [EX|PX] [TAGS]", "DEL,", "EXISTS", "TTL", "PTTL", "DELTAG", "FILLGET", "FILLSET", "PING", "HELLO", "AUTH",
	} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("serve -h does not mention %q", want)
		}
	}
}
