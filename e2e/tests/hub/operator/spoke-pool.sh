# On the spoke: a pool with the hub's addresses, prefix and gateway, whose spec.hub names the
# Secret, this spoke's namespace in the hub and the hub's pool. Claims refer to it as usual.
kubectl apply -f - <<YAML
apiVersion: ipam.cluster.x-k8s.io/v1alpha2
kind: GlobalInClusterIPPool
metadata:
  name: shared
spec:
  addresses: ["10.20.0.0/20"]
  prefix: 20
  gateway: 10.20.0.1
  hub:
    kubeconfigSecret: hub-kubeconfig
    namespace: $SPOKE
    pool:
      kind: GlobalInClusterIPPool
      name: shared
    blockSize: 16
YAML
