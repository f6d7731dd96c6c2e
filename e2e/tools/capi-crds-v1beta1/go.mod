// Pins the last Cluster API release whose IPAddressClaim and IPAddress are served and stored as
// v1beta1 only (no v1beta2): the v1beta1 contract scenarios run against its CRDs. No Go code:
// fetch.sh copies the CRD YAMLs out of the module zip (checked against go.sum).
module github.com/ferro-ipam/e2e/tools/capi-crds-v1beta1

go 1.26.0

require sigs.k8s.io/cluster-api v1.10.9
