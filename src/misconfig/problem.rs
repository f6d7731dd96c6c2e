//! Which API errors mean the install is wrong, rather than the API server being briefly away
//! (no client required).

use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue};

/// A misconfiguration ferro-ipam reports: the `problem` label of `ferro_ipam_misconfigured`.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq, PartialOrd, Ord, EncodeLabelValue)]
#[expect(
    non_camel_case_types,
    reason = "EncodeLabelValue writes a variant's name as the label value, and the values are snake_case"
)]
pub enum Problem {
    /// The leader-election Lease's namespace does not exist.
    lease_namespace_missing,
    /// RBAC refuses the leader-election Lease.
    lease_forbidden,
    /// RBAC refuses a list or watch of claims, addresses, pools or Clusters, or discovery.
    forbidden,
    /// The API server does not serve a kind ferro-ipam needs (its CRD is not installed).
    crd_missing,
    /// The API server cannot be reached at start.
    api_unreachable,
    /// The API server refuses the credentials (401).
    unauthorized,
    /// Another IPAM provider's leader Lease is held and renewed.
    other_provider_active,
    /// An admission webhook on a kind ferro-ipam writes cannot be called, so the API server
    /// refuses the write (the in-cluster provider's webhooks, left behind, at least).
    webhook_failing,
}

/// The labels of a `ferro_ipam_misconfigured` series: kept beside [`Problem`] so that the
/// reporter, which sets the gauge, needs nothing from `metrics`, which registers it.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ProblemLabels {
    pub problem: Problem,
}

impl Problem {
    pub const ALL: [Problem; 8] = [
        Problem::lease_namespace_missing,
        Problem::lease_forbidden,
        Problem::forbidden,
        Problem::crd_missing,
        Problem::api_unreachable,
        Problem::unauthorized,
        Problem::other_provider_active,
        Problem::webhook_failing,
    ];

    /// Whether no claim at all can be served while it lasts: then the replica is not ready.
    /// A refused write of one object stops that object's work only.
    pub fn stops_serving(self) -> bool {
        self != Problem::webhook_failing
    }

    /// What the operator must do, in the words of the log line.
    pub fn remedy(self) -> &'static str {
        match self {
            Problem::lease_namespace_missing => {
                "the leader-election Lease's namespace does not exist: create it, or point --leader-election-namespace at an existing one; no replica can lead, so nothing is allocated"
            }
            Problem::lease_forbidden => {
                "RBAC refuses the leader-election Lease: bind the Role of deploy/base/leader-election-rbac.yaml in the Lease's namespace; no replica can lead, so nothing is allocated"
            }
            Problem::forbidden => {
                "RBAC refuses a request ferro-ipam needs: bind the ClusterRole of deploy/base/rbac.yaml to its ServiceAccount; claims are not served"
            }
            Problem::crd_missing => {
                "the API server does not serve a kind ferro-ipam needs: install Cluster API's CRDs and ferro-ipam's pool CRDs (crds/); claims are not served"
            }
            Problem::api_unreachable => {
                "cannot reach the API server: check the kubeconfig's server address and the network; not ready until it answers"
            }
            Problem::other_provider_active => {
                "another IPAM provider is running: stop it (see docs/migration.md), or turn this check off with --other-provider-check=false if it serves other pools; nothing is allocated meanwhile"
            }
            Problem::webhook_failing => {
                "an admission webhook refuses the write because the API server cannot call it: delete the webhook configurations of a provider that is gone (the in-cluster provider's, see docs/migration.md), or bring its webhook service back; this object is not served meanwhile"
            }
            Problem::unauthorized => {
                "the API server refuses the credentials (401): check the kubeconfig's token or certificate, or the ServiceAccount token; not ready until they are accepted"
            }
        }
    }
}

/// What a failed request to the leader-election Lease means: a problem, or None for a
/// transient failure (a timeout, a 5xx, a conflict) that is only retried.
pub fn lease_problem(error: &kube::Error) -> Option<Problem> {
    match error {
        kube::Error::Api(status) => match status.code {
            401 => Some(Problem::unauthorized),
            403 => Some(Problem::lease_forbidden),
            // Only a create answers 404 with the namespace's name: a Lease not found is read
            // as "free" by the get.
            404 => Some(Problem::lease_namespace_missing),
            _ => None,
        },
        _ => None,
    }
}

/// What a failed list or watch means: a problem, or None for a transient failure.
pub fn watch_problem(error: &kube::Error) -> Option<Problem> {
    match error {
        kube::Error::Api(status) => match status.code {
            401 => Some(Problem::unauthorized),
            403 => Some(Problem::forbidden),
            404 => Some(Problem::crd_missing),
            _ => None,
        },
        _ => None,
    }
}

/// What a failed write (or read) of a reconcile means: a problem, or None for a failure that
/// a retry can fix.
pub fn reconcile_problem(error: &kube::Error) -> Option<Problem> {
    match error {
        kube::Error::Api(status) => match status.code {
            401 => Some(Problem::unauthorized),
            403 => Some(Problem::forbidden),
            // The API server's own words when a webhook's service cannot be reached or answers
            // with an error; a webhook that answers and denies says "denied the request".
            500 if status.message.contains("failed calling webhook") => Some(Problem::webhook_failing),
            _ => None,
        },
        _ => None,
    }
}

/// What a failed discovery at start means. Every failure is a problem here: until discovery
/// answers, no replica can serve.
pub fn discovery_problem(error: &anyhow::Error) -> Problem {
    if let Some(error) = error.chain().find_map(|e| e.downcast_ref::<kube::Error>()) {
        match error {
            kube::Error::Discovery(_) => return Problem::crd_missing,
            kube::Error::Api(status) if status.code == 401 => return Problem::unauthorized,
            kube::Error::Api(status) if status.code == 403 => return Problem::forbidden,
            kube::Error::Api(status) if status.code == 404 => return Problem::crd_missing,
            kube::Error::Api(_) => return Problem::api_unreachable,
            _ => {}
        }
    }
    // The only failure without a kube error: the claims are served at no version ferro-ipam knows.
    if format!("{error:#}").contains("serves IPAddressClaim") {
        return Problem::crd_missing;
    }
    Problem::api_unreachable
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api(code: u16) -> kube::Error {
        kube::Error::Api(kube::core::Status::failure("refused", "Whatever").with_code(code).boxed())
    }

    #[test]
    fn a_refused_lease_is_a_problem_and_a_conflict_or_a_server_error_is_not() {
        assert_eq!(lease_problem(&api(404)), Some(Problem::lease_namespace_missing));
        assert_eq!(lease_problem(&api(403)), Some(Problem::lease_forbidden));
        assert_eq!(lease_problem(&api(401)), Some(Problem::unauthorized));
        for transient in [409, 429, 500, 503, 504] {
            assert_eq!(lease_problem(&api(transient)), None, "{transient}");
        }
    }

    #[test]
    fn a_refused_watch_is_a_problem_and_a_gone_watch_is_not() {
        assert_eq!(watch_problem(&api(403)), Some(Problem::forbidden));
        assert_eq!(watch_problem(&api(404)), Some(Problem::crd_missing));
        assert_eq!(watch_problem(&api(410)), None);
        assert_eq!(watch_problem(&api(500)), None);
    }

    #[test]
    fn a_webhook_that_cannot_be_called_is_a_problem_and_other_server_errors_are_not() {
        let webhook = kube::Error::Api(
            kube::core::Status::failure(
                r#"Internal error occurred: failed calling webhook "validation.inclusterippool.ipam.cluster.x-k8s.io": failed to call webhook: Post "https://webhook-service.system.svc:443/validate": service "webhook-service" not found"#,
                "InternalError",
            )
            .with_code(500)
            .boxed(),
        );
        assert_eq!(reconcile_problem(&webhook), Some(Problem::webhook_failing));
        assert!(!Problem::webhook_failing.stops_serving());
        assert_eq!(reconcile_problem(&api(403)), Some(Problem::forbidden));
        for transient in [409, 422, 429, 500, 503] {
            assert_eq!(reconcile_problem(&api(transient)), None, "{transient}");
        }
    }

    #[test]
    fn every_manifest_a_remedy_names_exists_and_holds_the_kind_it_names() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        for problem in Problem::ALL {
            let remedy = problem.remedy();
            for (at, _) in remedy.match_indices("deploy/") {
                let path = remedy[at..].split([' ', ';', ',']).next().unwrap_or_default();
                let text = std::fs::read_to_string(root.join(path))
                    .unwrap_or_else(|e| panic!("{problem:?} names {path}, which cannot be read: {e}"));
                let kind = remedy[..at].trim_end().trim_end_matches(" of").rsplit(' ').next().unwrap_or_default();
                assert!(text.contains(&format!("kind: {kind}\n")), "{problem:?}: {path} holds no {kind}");
            }
        }
    }

    #[test]
    fn discovery_failures_name_their_cause() {
        assert_eq!(discovery_problem(&anyhow::Error::new(api(401)).context("discovering")), Problem::unauthorized);
        assert_eq!(discovery_problem(&anyhow::Error::new(api(403))), Problem::forbidden);
        assert_eq!(
            discovery_problem(&anyhow::anyhow!("the API server serves IPAddressClaim at []")),
            Problem::crd_missing
        );
        assert_eq!(discovery_problem(&anyhow::anyhow!("error trying to connect: refused")), Problem::api_unreachable);
    }
}
