# On the spoke: the hub's kubeconfig ($SPOKE.kubeconfig, from the hub's administrator) in a
# Secret of ferro-ipam's own namespace, under the key `kubeconfig`.
kubectl create namespace ferro-ipam-system
kubectl -n ferro-ipam-system create secret generic hub-kubeconfig --from-file=kubeconfig="$SPOKE.kubeconfig"
