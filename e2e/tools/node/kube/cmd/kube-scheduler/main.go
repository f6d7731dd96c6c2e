// Command kube-scheduler is the upstream Kubernetes kube-scheduler (k8s.io/kubernetes/cmd/kube-scheduler),
// built from the Go module proxy for the node of ferro-ipam's end-to-end tests.
// Same main as upstream; no code of its own.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"          // JSON log format
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // client-go metrics
	_ "k8s.io/component-base/metrics/prometheus/version"  // version metric
	"k8s.io/kubernetes/cmd/kube-scheduler/app"
)

func main() {
	command := app.NewSchedulerCommand()
	code := cli.Run(command)
	os.Exit(code)
}
