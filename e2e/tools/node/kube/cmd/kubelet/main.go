// Command kubelet is the upstream Kubernetes kubelet (k8s.io/kubernetes/cmd/kubelet),
// built from the Go module proxy for the node of ferro-ipam's end-to-end tests.
// Same main as upstream; no code of its own.
package main

import (
	"context"
	"os"

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"          // JSON log format
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // client-go metrics
	_ "k8s.io/component-base/metrics/prometheus/version"  // version metric
	"k8s.io/kubernetes/cmd/kubelet/app"
)

func main() {
	command := app.NewKubeletCommand(context.Background())
	code := cli.Run(command)
	os.Exit(code)
}
