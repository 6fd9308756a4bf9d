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
		if err := demo(ctx, args[1:], stdout); err != nil {
			fmt.Fprintln(stderr, "corral demo:", err)
			return 1
		}
		return 0
	case "serve":
		if err := serve(ctx, args[1:], stdout, stderr); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return 0
			}
			fmt.Fprintln(stderr, "corral serve:", err)
			return 1
		}
		return 0
	case "inspect":
		if err := inspect(ctx, args[1:], stdout, stderr); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return 0
			}
			fmt.Fprintln(stderr, "corral inspect:", err)
			return 1
		}
		return 0
	case "version", "--version", "-version":
		return printVersion(stdout)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	}
	fmt.Fprintf(stderr, "corral: unknown command %q\n\n%s", args[0], usage)
	return 2
}
