// Command etcd is the upstream etcd server (go.etcd.io/etcd/server/v3/etcdmain),
// built from the Go module proxy for ferro-ipam's end-to-end tests. Same entry
// point as upstream's server/main.go; no code of its own.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
