
#[tokio::test(flavor = "multi_thread")]
async fn zz_probe_peer_leader_election() {
    let s = Scope::new("probe-peer").await;
    ferro_ipam_e2e::peer::install_missing_crds(s.plane).unwrap();
    let mut peer = ferro_ipam_e2e::Peer::launch(s.plane, &s.plane.kubeconfig, &["--leader-elect=true", "--namespace", &s.ns]).unwrap();
    tokio::time::sleep(Duration::from_secs(6)).await;
    println!("PEER running={} log:\n{}", peer.is_running(), peer.log_tail(15));
}
