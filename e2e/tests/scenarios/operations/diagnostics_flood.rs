//! A flood of scrapes with new, bad tokens against the metrics endpoint, on an API server of its
//! own that audits every TokenReview and SubjectAccessReview: the API server sees no more
//! reviews than the endpoint's token bucket allows (5 a second, bursts of 20), the rest of the
//! flood gets 429, and a scraper let in before keeps getting 200 throughout.

use std::path::Path;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use ferro_ipam_e2e::https::{self, Trust};
use ferro_ipam_e2e::{ControlPlane, Provider};
use serde_json::Value;

use super::Audited;
use super::rbac::scope_on;
use super::scraper_token;

/// The bad tokens sent, and the connections that send them.
const TOKENS: usize = 10_000;
const CONNECTIONS: usize = 8;
/// The endpoint's bucket: reviews of new tokens per second, and at once after a quiet time.
const REVIEWS_PER_SECOND: f64 = 5.0;
const REVIEW_BURST: usize = 20;

/// A control plane of its own, auditing the reviews and nothing else: only this test's provider
/// creates them there.
fn audited() -> &'static Audited {
    static AUDITED: OnceLock<Audited> = OnceLock::new();
    AUDITED.get_or_init(|| {
        let policy = "apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [RequestReceived]\nrules:\n\
             - level: Metadata\n  resources:\n  - {group: authentication.k8s.io, resources: [tokenreviews]}\n  \
             - {group: authorization.k8s.io, resources: [subjectaccessreviews]}\n- level: None\n";
        Audited::start("audit-reviews", policy, &[])
    })
}

/// The TokenReviews and SubjectAccessReviews the API server answered so far.
fn reviews(log: &Path) -> (usize, usize) {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let answered: Vec<Value> = text
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).expect("audit events are JSON lines"))
        .filter(|e| e["stage"] == "ResponseComplete" && e["verb"] == "create")
        .collect();
    let of = |resource: &str| answered.iter().filter(|e| e["objectRef"]["resource"] == resource).count();
    (of("tokenreviews"), of("subjectaccessreviews"))
}

#[tokio::test(flavor = "multi_thread")]
async fn a_flood_of_bad_tokens_costs_the_api_server_bounded_reviews_and_the_scraper_goes_on() {
    let audited = audited();
    let plane: &'static ControlPlane = &audited.plane;
    let s = scope_on(plane, "diagnostics-flood").await;
    let provider = Provider::start_secure(plane, &s.provider_args()).unwrap();
    let reader = scraper_token(plane, &s.ns, "prometheus", true);
    let first_scrape = Instant::now();
    assert_eq!(provider.scrape(Some(&reader)).unwrap().0, 200);
    let before = reviews(&audited.log);
    assert_eq!(before, (1, 1), "the scraper's token was reviewed once");

    // At every moment of the flood, no more reviews than the bucket holds and has refilled; past
    // a minute, the scraper's own token is reviewed again too (outside the bucket).
    let started = Instant::now();
    let again = || (first_scrape.elapsed().as_secs() / 60) as usize;
    let within_bound = || {
        let elapsed = started.elapsed();
        let token_reviews = reviews(&audited.log).0 - before.0;
        let bound = REVIEW_BURST + (REVIEWS_PER_SECOND * elapsed.as_secs_f64()).ceil() as usize + again();
        assert!(token_reviews <= bound, "{token_reviews} reviews in {elapsed:.1?}: more than the bucket's {bound}");
    };
    let floods: Vec<_> = (0..CONNECTIONS)
        .map(|c| {
            let address = provider.metrics.clone();
            let tokens: Vec<String> = (0..TOKENS / CONNECTIONS).map(|i| format!("flood-{c}-{i}-not-a-token")).collect();
            std::thread::spawn(move || https::get_each(&address, "/metrics", &tokens, &Trust::Anything).unwrap())
        })
        .collect();
    let mut scrapes = 0;
    while !floods.iter().all(|flood| flood.is_finished()) {
        let (status, body) = provider.scrape(Some(&reader)).unwrap();
        assert_eq!(status, 200, "the scraper is refused during the flood: {body}");
        scrapes += 1;
        within_bound();
        std::thread::sleep(Duration::from_millis(50));
    }
    let statuses: Vec<u16> = floods.into_iter().flat_map(|flood| flood.join().unwrap()).collect();
    let elapsed = started.elapsed();
    within_bound();
    assert_eq!(provider.scrape(Some(&reader)).unwrap().0, 200);

    let after = reviews(&audited.log);
    let (token_reviews, access_reviews) = (after.0 - before.0, after.1 - before.1);
    let (unauthorized, busy) =
        (statuses.iter().filter(|s| **s == 401).count(), statuses.iter().filter(|s| **s == 429).count());
    eprintln!(
        "{TOKENS} bad tokens in {elapsed:.1?}: {token_reviews} TokenReviews and {access_reviews} \
         SubjectAccessReviews, {unauthorized} answered 401 and {busy} 429; {scrapes} scrapes, all 200"
    );
    assert_eq!(statuses.len(), TOKENS);
    assert_eq!(unauthorized + busy, TOKENS, "every bad token got 401 or 429, none 200");
    let again = again();
    assert!(token_reviews.abs_diff(unauthorized) <= again, "each token reviewed was answered 401, the others 429");
    assert!(access_reviews <= again, "no bad token reached a SubjectAccessReview");
    assert!(scrapes >= 2, "the scraper scraped during the flood: {scrapes}");
    assert!(
        provider.logged(&["WARN", "refusing metrics scrapes with 429", "reviews_per_second"]),
        "the refusals are warned of:\n{}",
        provider.log_tail(20)
    );
}
