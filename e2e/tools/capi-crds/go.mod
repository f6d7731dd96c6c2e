// Pins the Cluster API module whose CRD manifests the e2e tests install.
// No Go code: copy-crds.sh downloads the module zip through the Go module
// proxy (checked against go.sum) and copies the CRD YAMLs out of it.
module github.com/ferro-ipam/e2e/tools/capi-crds

go 1.26.0

require sigs.k8s.io/cluster-api v1.14.2
