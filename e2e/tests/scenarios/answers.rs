//! `ferro-ipam who-has` and `ferro-ipam top`, run as an operator runs them: the real binary,
//! the plane's kubeconfig, text and `-o json`.

use std::process::Command;

use ferro_ipam::api::keys::CLUSTER_NAME_LABEL;
use ferro_ipam_e2e::objects::Scope;
use ferro_ipam_e2e::provider::binary;
use serde_json::{Value, json};

use crate::PROMPTLY;

const IN_CLUSTER: &str = "InClusterIPPool";

/// Runs `ferro-ipam <args> --kubeconfig <plane> -o <format>`: it must answer (exit 0).
fn run(s: &Scope, args: &[&str], format: &str) -> String {
    run_with(&s.plane.kubeconfig, args, format)
}

fn run_with(kubeconfig: &std::path::Path, args: &[&str], format: &str) -> String {
    let output = Command::new(binary())
        .args(args)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(["-o", format])
        .output()
        .expect("running ferro-ipam");
    let stdout = String::from_utf8(output.stdout).expect("UTF-8");
    assert!(output.status.success(), "ferro-ipam {args:?}: {}", String::from_utf8_lossy(&output.stderr));
    stdout
}

/// The JSON answer; both answers are printed to the test's log.
fn answer(s: &Scope, args: &[&str]) -> Value {
    eprintln!("$ ferro-ipam {}\n{}", args.join(" "), run(s, args, "text"));
    let json = run(s, args, "json");
    eprintln!("$ ferro-ipam {} -o json\n{json}", args.join(" "));
    serde_json::from_str(&json).expect("JSON")
}

/// A pool `nodes` in `10.<net>.0.0/24` with a held, a sticky, a reserved and an excluded address,
/// and an empty pool `spare`.
async fn pool_and_claims(s: &Scope, net: u8) {
    s.cluster("wl", false).await.unwrap();
    s.pool(
        "nodes",
        json!({"addresses": [format!("10.{net}.0.10-10.{net}.0.20")], "prefix": 24, "gateway": format!("10.{net}.0.1"),
               "excludedAddresses": [format!("10.{net}.0.15")], "reservations": [{"address": format!("10.{net}.0.12"), "claimName": "vm-r"}]}),
    )
    .await
    .unwrap();
    s.pool("spare", json!({"addresses": [format!("10.{net}.1.0/24")], "prefix": 24})).await.unwrap();
    let owner = json!({"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "VSphereVM", "name": "wl-vm-0",
                       "uid": "6f1c2a4e-3b7d-4c1e-9a55-0c1d2e3f4a5b"});
    let metadata = json!({"labels": {CLUSTER_NAME_LABEL: "wl"}, "ownerReferences": [owner]});
    s.claim_with("wl-vm-0-0-0", IN_CLUSTER, "nodes", metadata).await.unwrap();
    assert_eq!(s.wait_allocated("wl-vm-0-0-0", PROMPTLY).await.unwrap().spec.address, format!("10.{net}.0.10"));
    s.claim("gone", IN_CLUSTER, "nodes").await.unwrap();
    assert_eq!(s.wait_allocated("gone", PROMPTLY).await.unwrap().spec.address, format!("10.{net}.0.11"));
    s.delete_claim("gone").await.unwrap();
    s.eventually("the pool remembers gone's address", PROMPTLY, || async {
        let status = s.pools().get("nodes").await.unwrap().status.unwrap_or_default();
        status.recently_released.iter().any(|r| r.address == format!("10.{net}.0.11"))
    })
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn who_has_names_the_holder_or_says_what_each_pool_makes_of_the_address() {
    let s = Scope::new("who-has").await;
    let _p = s.provider();
    pool_and_claims(&s, 180).await;
    let nodes = format!("InClusterIPPool {}/nodes", s.ns);

    let held = answer(&s, &["who-has", "10.180.0.10"]);
    let holder = &held["held"][0];
    assert_eq!(holder["pool"], nodes.as_str());
    assert_eq!(holder["ipAddress"], format!("{}/wl-vm-0-0-0", s.ns));
    assert_eq!(holder["claim"], format!("{}/wl-vm-0-0-0", s.ns));
    assert_eq!((holder["cluster"].as_str(), holder["owners"].clone()), (Some("wl"), json!(["VSphereVM/wl-vm-0"])));
    assert_eq!(
        (held["pools"][0]["state"].as_str(), held["pools"][0]["couldHandOut"].as_bool()),
        (Some("held"), Some(false))
    );

    let sticky = answer(&s, &["who-has", "10.180.0.11"]);
    assert_eq!(sticky["held"], json!([]));
    let view = &sticky["pools"][0];
    assert_eq!((view["state"].as_str(), view["couldHandOut"].as_bool()), (Some("free"), Some(true)));
    assert!(view["stickyFor"].as_str().is_some_and(|s| s.contains("/gone until ")), "{view}");

    let reserved = answer(&s, &["who-has", "10.180.0.12"]);
    let view = &reserved["pools"][0];
    assert_eq!((view["state"].as_str(), view["couldHandOut"].as_bool()), (Some("reserved"), Some(false)));
    assert_eq!(view["reservedFor"], "claim vm-r (spec.reservations[0])");

    let excluded = answer(&s, &["who-has", "10.180.0.15"]);
    assert_eq!(excluded["pools"][0]["state"], "blocked");
    assert!(excluded["pools"][0]["blocked"].as_str().is_some_and(|b| b.contains("excludedAddresses")), "{excluded}");

    let gateway = answer(&s, &["who-has", "10.180.0.1"]);
    // The gateway lies outside the pool's addresses; it is named all the same.
    assert_eq!(gateway["pools"][0]["state"], "blocked");
    assert!(gateway["pools"][0]["blocked"].as_str().is_some_and(|b| b.contains("gateway")), "{gateway}");
    assert_eq!(answer(&s, &["who-has", "10.99.99.99"]), json!({"address": "10.99.99.99", "held": [], "pools": []}));
}

#[tokio::test(flavor = "multi_thread")]
async fn top_lists_the_namespaces_pools_fastest_filling_first() {
    let s = Scope::new("top").await;
    let _p = s.provider();
    pool_and_claims(&s, 181).await;
    s.eventually("both pools have counts", PROMPTLY, || async {
        s.pool_used("nodes").await == Some(1) && s.pool_used("spare").await == Some(0)
    })
    .await
    .unwrap();
    let top = answer(&s, &["top", "--namespace", &s.ns]);
    let rows = top["pools"].as_array().expect("rows");
    let names: Vec<&str> = rows.iter().filter_map(|r| r["pool"].as_str()).collect();
    assert_eq!(names, [format!("InClusterIPPool {}/nodes", s.ns), format!("InClusterIPPool {}/spare", s.ns)]);
    let nodes = &rows[0];
    // 11 addresses, 10.181.0.15 excluded: 10; one held, one reserved, 10.181.0.11 free again.
    assert_eq!((nodes["total"].as_i64(), nodes["used"].as_i64(), nodes["free"].as_i64()), (Some(10), Some(1), Some(8)));
    // gone's IPAddress is deleted: one object of the last hour is left.
    assert_eq!((nodes["reserved"].as_i64(), nodes["lastHour"].as_u64()), (Some(1), Some(1)));
    assert_eq!(nodes["hoursToFull"].as_f64(), Some(8.0), "8 free at 1 an hour");
    assert_eq!(rows[1]["hoursToFull"], Value::Null, "nothing allocated lately: never full");
}

#[tokio::test(flavor = "multi_thread")]
async fn top_with_metrics_reads_the_leaders_counters_over_https_and_puts_the_busy_pool_first() {
    // As deployed: metrics over HTTPS, read with the token of a metrics reader.
    let s = Scope::new("top-metrics").await;
    let provider = ferro_ipam_e2e::Provider::start_secure(s.plane, &s.provider_args()).unwrap();
    let token_file = s.plane.dir.join(format!("{}-reader.token", s.ns));
    std::fs::write(&token_file, crate::operations::scraper_token(s.plane, &s.ns, "reader", true)).unwrap();
    // `idle` is the fuller, `busy` the one that fills while top reads the counters.
    s.pool("idle", json!({"addresses": ["10.183.0.10-10.183.0.13"], "prefix": 24})).await.unwrap();
    s.pool("busy", json!({"addresses": ["10.183.1.0/24"], "prefix": 24})).await.unwrap();
    for name in ["i-0", "i-1"] {
        s.claim(name, IN_CLUSTER, "idle").await.unwrap();
        s.wait_allocated(name, PROMPTLY).await.unwrap();
    }
    let url = format!("https://{}/metrics", provider.metrics);
    let token = token_file.to_string_lossy().into_owned();
    let args: Vec<String> = ["top", "--namespace", &s.ns, "--metrics", &url, "--metrics-interval", "4s"]
        .into_iter()
        .chain(["--metrics-token-file", &token, "--metrics-insecure-skip-tls-verify"])
        .map(str::to_owned)
        .collect();
    // top reads the counters twice, 4 s apart, while claims keep coming to `busy`.
    let kubeconfig = s.plane.kubeconfig.clone();
    let reading = tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        eprintln!("$ ferro-ipam {}\n{}", args.join(" "), run_with(&kubeconfig, &args, "text"));
        run_with(&kubeconfig, &args, "json")
    });
    for n in 0..24 {
        s.claim(&format!("b-{n}"), IN_CLUSTER, "busy").await.unwrap();
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    }
    let json = reading.await.unwrap();
    eprintln!("$ ferro-ipam top ... -o json\n{json}");
    let top: Value = serde_json::from_str(&json).expect("JSON");
    let rows = top["pools"].as_array().expect("rows");
    let row =
        |pool: &str| rows.iter().find(|r| r["pool"] == format!("InClusterIPPool {}/{pool}", s.ns)).expect("a row");
    let busy = row("busy")["netPerHour"].as_f64().expect("busy has a rate from the metrics");
    assert!(busy > 0.0, "busy gained addresses while top read: {busy}");
    assert_eq!(row("idle")["netPerHour"].as_f64(), Some(0.0), "idle gained nothing");
    assert_eq!(row("idle")["hoursToFull"], Value::Null, "a pool gaining nothing is never full");
    assert_eq!(
        rows[0]["pool"],
        format!("InClusterIPPool {}/busy", s.ns),
        "the filling pool first, though idle is fuller"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn explain_says_how_a_claim_got_its_address_or_why_it_waits() {
    use crate::purpose::{ALL_PROVIDERS, VIPS, ask, labelled_pool, labels};
    let s = Scope::wide("explain").await;
    let _p = s.provider();
    pool_and_claims(&s, 182).await;
    s.claim("vm-r", IN_CLUSTER, "nodes").await.unwrap();
    assert_eq!(s.wait_allocated("vm-r", PROMPTLY).await.unwrap().spec.address, "10.182.0.12");
    let reserved = answer(&s, &["explain", &format!("{}/vm-r", s.ns)]);
    assert_eq!((reserved["state"].as_str(), reserved["address"].as_str()), (Some("served"), Some("10.182.0.12")));
    assert_eq!(reserved["origin"], "reserved for it by spec.reservations[0]");
    assert_eq!(reserved["strategy"], "Lowest");

    s.pool("tiny", json!({"addresses": ["10.182.2.10"], "prefix": 24})).await.unwrap();
    s.claim("t-0", IN_CLUSTER, "tiny").await.unwrap();
    s.wait_allocated("t-0", PROMPTLY).await.unwrap();
    s.claim("t-1", IN_CLUSTER, "tiny").await.unwrap();
    s.wait_reason("t-1", "PoolExhausted", PROMPTLY).await.unwrap();
    let waiting = answer(&s, &["explain", &format!("{}/t-1", s.ns)]);
    assert_eq!(waiting["state"], "pending");
    assert!(waiting["waits"].as_str().is_some_and(|w| w.starts_with("PoolExhausted: ")), "{waiting}");

    // A purpose claim: the first labelled pool is full, the second serves it.
    labelled_pool(&s, "vips-a", "10.182.3.10", labels(&[(VIPS, "true"), ALL_PROVIDERS])).await;
    labelled_pool(&s, "vips-b", "10.182.4.10-10.182.4.11", labels(&[(VIPS, "true"), ALL_PROVIDERS])).await;
    ask(&s, "vip-0", VIPS, json!({})).await;
    assert_eq!(s.wait_allocated("vip-0", PROMPTLY).await.unwrap().spec.address, "10.182.3.10");
    ask(&s, "vip-1", VIPS, json!({})).await;
    assert_eq!(s.wait_allocated("vip-1", PROMPTLY).await.unwrap().spec.address, "10.182.4.10");
    let purpose = answer(&s, &["explain", &format!("{}/vip-1", s.ns)]);
    assert_eq!(purpose["pool"], format!("InClusterIPPool {}/vips-b", s.ns));
    let verdicts: Vec<(String, String)> = purpose["candidates"]
        .as_array()
        .expect("candidates")
        .iter()
        .take(2)
        .map(|c| {
            (c["pool"].as_str().unwrap_or_default().to_owned(), c["verdict"].as_str().unwrap_or_default().to_owned())
        })
        .collect();
    assert_eq!(
        verdicts,
        [
            (format!("InClusterIPPool {}/vips-a", s.ns), "passed over: no free address".to_owned()),
            (format!("InClusterIPPool {}/vips-b", s.ns), "chosen".to_owned()),
        ]
    );
}
