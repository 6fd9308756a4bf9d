// Command pause is the sandbox ("pause") image of the test node: the process that holds a
// pod's namespaces while its containers come and go. It does what Kubernetes' own pause does —
// wait for a signal, reap the zombies it inherits as the pod's PID 1 — as a static Go binary,
// so the node needs no image from a registry.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for s := range sigs {
		if s != syscall.SIGCHLD {
			return
		}
		for {
			var ws syscall.WaitStatus
			if pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil); pid <= 0 || err != nil {
				break
			}
		}
	}
}
