// Command kube-controller-manager is the upstream Kubernetes kube-controller-manager (k8s.io/kubernetes/cmd/kube-controller-manager),
// built from the Go module proxy for the node of ferro-ipam's end-to-end tests.
// Same main as upstream; no code of its own.
package main

import (
	"os"
	_ "time/tzdata" // CronJob time zones

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"          // JSON log format
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // client-go metrics
	_ "k8s.io/component-base/metrics/prometheus/version"  // version metric
	"k8s.io/kubernetes/cmd/kube-controller-manager/app"
)

func main() {
	command := app.NewControllerManagerCommand()
	code := cli.Run(command)
	os.Exit(code)
}
