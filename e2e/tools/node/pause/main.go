// Command pause is the sandbox ("infra") container of the e2e node's pods: the process that
// holds a pod's namespaces open while its containers come and go. containerd asks for
// registry.k8s.io/pause, which no registry here serves, so the node image is built from this.
//
// It does what a pod's first process must: it waits for SIGINT or SIGTERM and exits 0, and,
// being PID 1 of the pod when the pod shares its process namespace, it reaps every child
// that is re-parented to it, so none stays a zombie.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "-v" {
		fmt.Println("pause (ferro-ipam e2e node)")
		return
	}
	if os.Getpid() != 1 {
		fmt.Fprintln(os.Stderr, "pause: warning: not PID 1")
	}
	signals := make(chan os.Signal, 8)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for s := range signals {
		if s == syscall.SIGCHLD {
			reap()
			continue
		}
		fmt.Fprintf(os.Stderr, "pause: shutting down on %v\n", s)
		os.Exit(0)
	}
}

// reap collects every child that has exited, without blocking.
func reap() {
	for {
		var status syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
	}
}
