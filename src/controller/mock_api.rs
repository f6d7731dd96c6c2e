//! A scripted API server for reconcile tests, in the style of kube-rs's controller-rs: a test
//! lists the requests one reconcile must send, in order, each with its answer. The mock checks
//! each request's method, path and body, answers it, and records anything unexpected; the test
//! ends with [`MockApi::finish`], which fails on a mismatch or on a request that never came.
//! No API server, no network: a reconcile test runs in milliseconds.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http::{Method, Request, Response};
use kube::Client;
use kube::client::Body;
use kube::runtime::events::{Recorder, Reporter};
use kube::runtime::reflector::store::Writer;
use kube::runtime::watcher::Event;
use serde_json::{Value, json};

use crate::api::CapiVersion;
use crate::api::capi::Cluster;
use crate::client::{Fence, ServerClock};
use crate::index::Index;
use crate::metrics::Metrics;

use super::context::{Caches, Context, Kube, Report, Writes};
use super::latency::Latency;
use super::write_throttle::WriteThrottle;
use crate::store::addresses::{AddressCache, AddressCacheWriter};
use crate::store::claims::ClaimStore;
use crate::sync::lock;

type BodyCheck = Box<dyn Fn(&Value) -> Result<(), String> + Send + Sync>;

/// One request the reconcile must send, and the answer it gets.
pub struct Expect {
    method: Method,
    path: String,
    status: u16,
    answer: Value,
    check: Option<BodyCheck>,
}

impl Expect {
    /// A request of `method` on `path` (without the query), answered 200 with `{}`.
    pub fn new(method: Method, path: impl Into<String>) -> Self {
        Expect { method, path: path.into(), status: 200, answer: json!({}), check: None }
    }

    pub fn answer(mut self, status: u16, body: Value) -> Self {
        self.status = status;
        self.answer = body;
        self
    }

    /// An answer of `status` as the API server words a failure (a `Status` object).
    pub fn refuse(self, status: u16, reason: &str) -> Self {
        let body = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": status,
            "reason": reason, "message": format!("refused by the test: {reason}")});
        self.answer(status, body)
    }

    /// Checks the request's JSON body; an `Err` fails the test with its message.
    pub fn body(mut self, check: impl Fn(&Value) -> Result<(), String> + Send + Sync + 'static) -> Self {
        self.check = Some(Box::new(check));
        self
    }
}

#[derive(Default)]
struct Log {
    script: VecDeque<Expect>,
    sent: Vec<String>,
    failures: Vec<String>,
}

/// The scripted server behind a test's client.
#[derive(Clone)]
pub struct MockApi {
    log: Arc<Mutex<Log>>,
}

impl MockApi {
    /// A client whose requests the script answers.
    pub fn client(script: Vec<Expect>) -> (Client, MockApi) {
        let log = Arc::new(Mutex::new(Log { script: script.into(), ..Log::default() }));
        let mock = MockApi { log: log.clone() };
        let service = tower::service_fn(move |request: Request<Body>| {
            let log = log.clone();
            async move { Ok::<_, std::convert::Infallible>(answer(&log, request).await) }
        });
        (Client::new(service, "default"), mock)
    }

    fn log(&self) -> std::sync::MutexGuard<'_, Log> {
        lock(&self.log)
    }

    /// The requests sent so far, as `METHOD path`.
    pub fn sent(&self) -> Vec<String> {
        self.log().sent.clone()
    }

    /// Fails the test when a request was not the one expected, or an expected one never came.
    pub fn finish(&self) {
        let log = self.log();
        let left: Vec<String> = log.script.iter().map(|e| format!("{} {}", e.method, e.path)).collect();
        assert!(log.failures.is_empty(), "unexpected requests: {:#?}\nsent: {:#?}", log.failures, log.sent);
        assert!(left.is_empty(), "requests never sent: {left:#?}\nsent: {:#?}", log.sent);
    }
}

async fn answer(log: &Mutex<Log>, request: Request<Body>) -> Response<Body> {
    let (parts, body) = request.into_parts();
    let bytes = body.collect_bytes().await.unwrap_or_default();
    let sent: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    let line = format!("{} {}", parts.method, parts.uri.path());
    let mut log = lock(log);
    log.sent.push(line.clone());
    let Some(expected) = log.script.pop_front() else {
        log.failures.push(format!("{line}: nothing more was expected"));
        return respond(500, &json!({"kind": "Status", "code": 500, "message": "unexpected request"}));
    };
    if expected.method != parts.method || expected.path != parts.uri.path() {
        log.failures.push(format!("{line}: expected {} {}", expected.method, expected.path));
        return respond(500, &json!({"kind": "Status", "code": 500, "message": "unexpected request"}));
    }
    if let Some(Err(problem)) = expected.check.as_ref().map(|check| check(&sent)) {
        log.failures.push(format!("{line}: {problem}; body: {sent}"));
    }
    respond(expected.status, &expected.answer)
}

fn respond(status: u16, body: &Value) -> Response<Body> {
    Response::builder()
        .status(status)
        .header("content-type", "application/json")
        .body(Body::from(serde_json::to_vec(body).unwrap_or_default()))
        .unwrap_or_else(|_| Response::new(Body::empty()))
}

/// What a reconcile test stands on: a context over the mock client, and the writers of its
/// stores (already listed, so empty but ready).
pub struct World {
    pub ctx: Arc<Context>,
    pub addresses: AddressCacheWriter,
    pub claims: ClaimStore,
    pub clusters: Writer<Cluster>,
    /// What the index asks the controllers to look at again.
    pub triggers: tokio::sync::mpsc::UnboundedReceiver<crate::index::Trigger>,
}

impl World {
    /// A v1beta2 world with an empty, complete index, an open fence and no sticky addresses.
    pub fn new(client: Client) -> World {
        World::with_fence(client, Fence::always_open())
    }

    pub fn with_fence(client: Client, fence: Fence) -> World {
        let capi = CapiVersion::V1Beta2;
        let (address_cache, mut addresses) = AddressCache::new();
        addresses.apply(&Event::Init);
        addresses.apply(&Event::InitDone);
        let claims = ClaimStore::default();
        let _ = claims.apply(&Event::Init);
        let _ = claims.apply(&Event::InitDone);
        let mut clusters = Writer::new(capi.cluster_resource());
        listed(&mut clusters);
        let (index, triggers) = Index::new(Duration::ZERO);
        index.set_ready();
        let reporter = Reporter { controller: "ferro-ipam".into(), instance: Some("test".into()) };
        let ctx = Context {
            kube: Kube {
                client: client.clone(),
                capi,
                claim_resource: capi.claim_resource(),
                address_resource: capi.address_resource(),
                cluster_resource: Some(capi.cluster_resource()),
                fence,
                clock: ServerClock::default(),
            },
            index: index.clone(),
            caches: Caches {
                addresses: address_cache,
                claims: claims.clone(),
                // Clusters are listed, and none exists: claims that name none are served.
                clusters: Some(clusters.as_reader()),
                providers: crate::client::providers::Providers::new(client.clone()),
                namespaces: None,
                spokes: crate::feed::SpokePools::new(index.clone()),
            },
            report: Report {
                recorder: Recorder::new(client, reporter),
                metrics: Arc::new(Metrics::new()),
                misconfig: crate::misconfig::Misconfig::new(Default::default(), Default::default()),
                latency: Latency::default(),
            },
            writes: Writes {
                own: super::own_writes::OwnWrites::new(Duration::from_secs(30)),
                pools: WriteThrottle::new(Duration::ZERO, Duration::from_secs(5), 1000),
            },
            only_namespace: None,
        };
        World { ctx: Arc::new(ctx), addresses, claims, clusters, triggers }
    }
}

/// An empty listing, so that the store counts as ready.
fn listed<K>(writer: &mut Writer<K>)
where
    K: kube::Resource + Clone + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone,
{
    writer.apply_watcher_event(&Event::Init);
    writer.apply_watcher_event(&Event::InitDone);
}

/// The path of a namespaced object of a resource at `api_version` (`group/version`).
pub fn path(api_version: &str, namespace: &str, plural: &str, name: Option<&str>) -> String {
    let base = format!("/apis/{api_version}/namespaces/{namespace}/{plural}");
    match name {
        Some(name) => format!("{base}/{name}"),
        None => base,
    }
}
