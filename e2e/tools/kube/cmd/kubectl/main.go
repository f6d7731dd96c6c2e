// Command kubectl is the upstream kubectl (k8s.io/kubernetes/cmd/kubectl),
// built from the Go module proxy for ferro-ipam's end-to-end tests. Same main
// as upstream; no code of its own.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/component-base/logs"
	"k8s.io/kubectl/pkg/cmd"
	"k8s.io/kubectl/pkg/cmd/util"

	_ "k8s.io/client-go/plugin/pkg/client/auth" // client auth plugins, as upstream
)

func main() {
	// Set klog verbosity before the command is built (plugins, .kuberc), as upstream.
	logs.GlogSetter(cmd.GetLogVerbosity(os.Args)) // nolint:errcheck
	command := cmd.NewDefaultKubectlCommand()
	if err := cli.RunNoErrOutput(command); err != nil {
		util.CheckErr(err)
	}
}
