# On the hub, once per spoke ($SPOKE): its namespace, an identity that may keep AddressBlocks
# and its Lease there and nothing else, and a kubeconfig for it ($SPOKE.kubeconfig).
kubectl create namespace "$SPOKE"
kubectl label namespace "$SPOKE" hub.ferro-ipam.dev/spoke="$SPOKE"
kubectl -n "$SPOKE" create serviceaccount ferro-ipam-spoke
kubectl -n "$SPOKE" apply -f - <<'YAML'
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: ferro-ipam-spoke
rules:
- apiGroups: ["hub.ferro-ipam.dev"]
  resources: ["addressblocks"]
  verbs: ["list", "watch", "create", "delete"]
- apiGroups: ["coordination.k8s.io"]
  resources: ["leases"]
  verbs: ["get", "create", "update"]
YAML
kubectl -n "$SPOKE" create rolebinding ferro-ipam-spoke --role=ferro-ipam-spoke \
  --serviceaccount="$SPOKE:ferro-ipam-spoke"

token=$(kubectl -n "$SPOKE" create token ferro-ipam-spoke --duration=24h)
server=$(kubectl config view --minify -o jsonpath='{.clusters[0].cluster.server}')
kubectl config view --minify --flatten -o jsonpath='{.clusters[0].cluster.certificate-authority-data}' \
  | base64 -d > hub-ca.crt
kubectl --kubeconfig="$SPOKE.kubeconfig" config set-cluster hub --server="$server" \
  --certificate-authority=hub-ca.crt --embed-certs=true
kubectl --kubeconfig="$SPOKE.kubeconfig" config set-credentials "$SPOKE" --token="$token"
kubectl --kubeconfig="$SPOKE.kubeconfig" config set-context hub --cluster=hub --user="$SPOKE" --namespace="$SPOKE"
kubectl --kubeconfig="$SPOKE.kubeconfig" config use-context hub
