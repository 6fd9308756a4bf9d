// Command corral runs corral: `corral demo` shows the one-fill property on this machine with
// no setup.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	_ "github.com/corralcache/corral/peer/k8s" // --join k8s://namespace/service
)

const usage = `corral — a distributed read-through cache for Go services

Usage:
  corral serve [flags]   run a node with an HTTP front (a caching proxy for an HTTP origin)
  corral inspect --addr host:port [--key K]
                         print a node's view of the cluster, and K's owner
  corral demo [flags]    run a cluster on this machine and show one fill per expiry
  corral version         the release, commit, Go version and platform of this binary
  corral help            this text

Run "corral <command> -h" for a command's flags.
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// run is main without the process: it returns the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "demo":
		return exitCode(stderr, "demo", demo(ctx, args[1:], stdout))
	case "serve":
		return exitCode(stderr, "serve", serve(ctx, args[1:], stdout, stderr))
	case "inspect":
		return exitCode(stderr, "inspect", inspect(ctx, args[1:], stdout, stderr))
	case "version", "--version", "-version":
		return printVersion(stdout)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	}
	fmt.Fprintf(stderr, "corral: unknown command %q\n\n%s", args[0], usage)
	return 2
}

// exitCode is a command's exit code for its error: 0 for none and for -h (its usage is
// printed), else 1 with the error on stderr. The library's errors begin "corral: ", which
// after "corral serve: " would say it twice.
func exitCode(stderr io.Writer, command string, err error) int {
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	}
	fmt.Fprintf(stderr, "corral %s: %s\n", command, strings.TrimPrefix(err.Error(), "corral: "))
	return 1
}
