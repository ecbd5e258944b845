// Command pause is the image of every pod's sandbox container (hack/images/pause): it holds
// the pod's namespaces for its containers and does nothing else. It waits for SIGTERM or
// SIGINT and exits 0. As PID 1 of a pod whose containers share one process namespace
// (shareProcessNamespace), orphaned processes are reparented to it: it reaps them on each
// SIGCHLD, so no zombie is left, as Kubernetes' own pause does.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	if os.Getpid() != 1 {
		fmt.Fprintln(os.Stderr, "pause: warning: not PID 1, will not reap the processes of the pod")
	}
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	for sig := range sigs {
		if sig != syscall.SIGCHLD {
			fmt.Fprintf(os.Stderr, "pause: shutting down, got signal %v\n", sig)
			return
		}
		reap()
	}
}

// reap waits for every child that has exited, without blocking: signals coalesce, so one
// SIGCHLD may stand for several.
func reap() {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
	}
}
