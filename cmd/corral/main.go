// Command corral runs corral: `corral demo` shows the one-fill property on this machine with
// no setup.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

const usage = `corral — a distributed read-through cache for Go services

Usage:
  corral demo [flags]    run a cluster on this machine and show one fill per expiry
  corral help            this text

Run "corral demo -h" for the demo's flags.
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
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	}
	fmt.Fprintf(stderr, "corral: unknown command %q\n\n%s", args[0], usage)
	return 2
}
