# On the hub: the pool the spokes share. Its label lets spokes lease blocks of it.
kubectl apply -f - <<'YAML'
apiVersion: ipam.cluster.x-k8s.io/v1alpha2
kind: GlobalInClusterIPPool
metadata:
  name: shared
  labels:
    hub.ferro-ipam.dev/shared: "true"
spec:
  addresses: ["10.20.0.0/20"]
  prefix: 20
  gateway: 10.20.0.1
YAML
