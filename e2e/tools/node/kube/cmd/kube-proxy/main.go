// Command kube-proxy is the upstream Kubernetes kube-proxy (k8s.io/kubernetes/cmd/kube-proxy),
// built from the Go module proxy for the node of ferro-ipam's end-to-end tests.
// Same main as upstream; no code of its own.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"          // JSON log format
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // client-go metrics
	_ "k8s.io/component-base/metrics/prometheus/version"  // version metric
	"k8s.io/kubernetes/cmd/kube-proxy/app"
)

func main() {
	command := app.NewProxyCommand()
	code := cli.Run(command)
	os.Exit(code)
}
