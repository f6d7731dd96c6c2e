//! What the control-plane VIP of a Cluster needs next (pure).

use std::net::IpAddr;

use kube::ResourceExt;

use crate::api::capi::{Cluster, IPAddressClaim};
use crate::api::keys::{CONTROL_PLANE_VIP_FINALIZER, CONTROL_PLANE_VIP_LABEL};

use crate::api::capi::cluster_is_paused;

/// The port written beside the VIP unless the opt-in label names another.
pub const DEFAULT_PORT: i32 = 6443;

/// What is known of a Cluster's VIP.
pub struct Observed<'a> {
    pub cluster: &'a Cluster,
    /// The Cluster's VIP claim, if it exists.
    pub claim: Option<&'a IPAddressClaim>,
    /// What is known of the claim's address.
    pub address: VipAddress,
}

/// What is known of the VIP claim's address. Only a known address can differ from the
/// endpoint: an `IPAddress` the cache has not shown is unknown, never absent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VipAddress {
    /// The claim's status names no `IPAddress` yet.
    Pending,
    /// The claim's status names an `IPAddress` the cache does not hold: one written a moment
    /// ago, or deleted by hand and being made again with the same address.
    Unseen,
    /// The address its `IPAddress` records.
    Known(IpAddr),
}

/// The one thing to do now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// Nothing to do; the reason is logged.
    Nothing(String),
    /// The opt-in label is not `"true"` or a port: tell the user.
    BadLabel(String),
    /// Our finalizer first, so that the claim is released when the Cluster goes.
    AddFinalizer,
    CreateClaim,
    WriteEndpoint {
        host: String,
        port: i32,
    },
    DeleteClaim(String),
    DropFinalizer,
}

/// The port the opt-in label asks for: `"true"` means 6443.
pub fn port(label: &str) -> Result<i32, String> {
    let value = label.trim();
    if value.eq_ignore_ascii_case("true") {
        return Ok(DEFAULT_PORT);
    }
    match value.parse::<i32>() {
        Ok(port) if (1..=65535).contains(&port) => Ok(port),
        _ => Err(format!(
            "label {CONTROL_PLANE_VIP_LABEL}: {label:?} is neither \"true\" (port {DEFAULT_PORT}) nor a port from 1 to 65535"
        )),
    }
}

fn endpoint_host(cluster: &Cluster) -> Option<&str> {
    cluster.spec.control_plane_endpoint.as_ref().and_then(|e| e.host.as_deref()).filter(|h| !h.is_empty())
}

pub fn plan(observed: &Observed) -> Step {
    let cluster = observed.cluster;
    let finalized = cluster.finalizers().iter().any(|f| f == CONTROL_PLANE_VIP_FINALIZER);
    let claim_deleting = observed.claim.is_some_and(|c| c.metadata.deletion_timestamp.is_some());
    if cluster_is_paused(cluster) {
        return Step::Nothing("the Cluster is paused".into());
    }
    if cluster.metadata.deletion_timestamp.is_some() {
        return match observed.claim {
            Some(_) if claim_deleting => Step::Nothing("waiting for the VIP claim to release its address".into()),
            Some(_) => Step::DeleteClaim("the Cluster is being deleted".into()),
            None if finalized => Step::DropFinalizer,
            None => Step::Nothing("the Cluster is being deleted".into()),
        };
    }
    let Some(label) = cluster.labels().get(CONTROL_PLANE_VIP_LABEL) else {
        return Step::Nothing("the Cluster does not ask for a control-plane VIP".into());
    };
    let port = match port(label) {
        Ok(port) => port,
        Err(message) => return Step::BadLabel(message),
    };
    if let Some(host) = endpoint_host(cluster) {
        return with_endpoint(host, observed, finalized, claim_deleting);
    }
    if !finalized {
        return Step::AddFinalizer;
    }
    match (observed.claim, observed.address) {
        (None, _) => Step::CreateClaim,
        (Some(_), _) if claim_deleting => Step::Nothing("the old VIP claim is being deleted".into()),
        (Some(_), VipAddress::Known(ip)) => Step::WriteEndpoint { host: ip.to_string(), port },
        (Some(_), _) => Step::Nothing("waiting for the VIP claim's address".into()),
    }
}

/// The Cluster has an endpoint: ours when the VIP claim's known address is that host. The claim
/// goes back to its pool only when its address is known and is another: a claim whose address
/// is pending or not yet seen is waited for, whatever the endpoint says.
fn with_endpoint(host: &str, observed: &Observed, finalized: bool, claim_deleting: bool) -> Step {
    let Some(_) = observed.claim else {
        return Step::Nothing(format!("spec.controlPlaneEndpoint.host is already {host}; it is never overwritten"));
    };
    if claim_deleting {
        return Step::Nothing("the old VIP claim is being deleted".into());
    }
    match observed.address {
        VipAddress::Known(ip) if host.parse::<IpAddr>().ok() == Some(ip) => match finalized {
            true => Step::Nothing("the endpoint is the VIP".into()),
            false => Step::AddFinalizer,
        },
        VipAddress::Known(ip) => Step::DeleteClaim(format!(
            "spec.controlPlaneEndpoint.host was set to {host} by someone else, and the VIP claim holds {ip}"
        )),
        VipAddress::Unseen => Step::Nothing(format!(
            "the VIP claim's IPAddress is not seen yet; the endpoint {host} is judged once it is"
        )),
        VipAddress::Pending => {
            Step::Nothing(format!("the VIP claim has no address yet; the endpoint {host} is judged once it has"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::capi::ApiEndpoint;
    use crate::fixtures::{claim, cluster};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    fn opted_in(label: &str) -> Cluster {
        let mut c = cluster("wl");
        c.labels_mut().insert(CONTROL_PLANE_VIP_LABEL.into(), label.into());
        c.metadata.finalizers = Some(vec![CONTROL_PLANE_VIP_FINALIZER.into()]);
        c
    }

    fn with_host(mut c: Cluster, host: &str) -> Cluster {
        c.spec.control_plane_endpoint = Some(ApiEndpoint { host: Some(host.into()), port: Some(6443) });
        c
    }

    fn ip(s: &str) -> VipAddress {
        VipAddress::Known(s.parse().unwrap())
    }

    #[test]
    fn opted_in_cluster_gets_finalizer_then_claim_then_endpoint() {
        let mut c = opted_in("true");
        c.metadata.finalizers = None;
        assert_eq!(plan(&Observed { cluster: &c, claim: None, address: VipAddress::Pending }), Step::AddFinalizer);
        let c = opted_in("true");
        assert_eq!(plan(&Observed { cluster: &c, claim: None, address: VipAddress::Pending }), Step::CreateClaim);
        let vip = claim("wl-control-plane-vip", "cluster-api-vips");
        assert!(matches!(
            plan(&Observed { cluster: &c, claim: Some(&vip), address: VipAddress::Pending }),
            Step::Nothing(_)
        ));
        assert_eq!(
            plan(&Observed { cluster: &c, claim: Some(&vip), address: ip("10.0.0.5") }),
            Step::WriteEndpoint { host: "10.0.0.5".into(), port: 6443 }
        );
        let done = with_host(c, "10.0.0.5");
        assert!(matches!(
            plan(&Observed { cluster: &done, claim: Some(&vip), address: ip("10.0.0.5") }),
            Step::Nothing(_)
        ));
    }

    #[test]
    fn the_label_may_name_the_port_and_nonsense_is_reported() {
        let c = opted_in("8443");
        let vip = claim("wl-control-plane-vip", "cluster-api-vips");
        assert_eq!(
            plan(&Observed { cluster: &c, claim: Some(&vip), address: ip("fd00::5") }),
            Step::WriteEndpoint { host: "fd00::5".into(), port: 8443 }
        );
        let bad = opted_in("yes");
        assert!(
            matches!(plan(&Observed { cluster: &bad, claim: None, address: VipAddress::Pending }), Step::BadLabel(m) if m.contains("\"yes\""))
        );
        assert!(port("70000").is_err());
    }

    #[test]
    fn an_endpoint_set_by_someone_else_is_never_overwritten() {
        let c = with_host(opted_in("true"), "192.0.2.10");
        assert!(matches!(plan(&Observed { cluster: &c, claim: None, address: VipAddress::Pending }), Step::Nothing(_)));
        // A VIP claimed before the user set the endpoint goes back to the pool.
        let vip = claim("wl-control-plane-vip", "cluster-api-vips");
        assert!(matches!(
            plan(&Observed { cluster: &c, claim: Some(&vip), address: ip("10.0.0.5") }),
            Step::DeleteClaim(_)
        ));
    }

    #[test]
    fn paused_or_unlabelled_clusters_are_left_alone() {
        let mut paused = opted_in("true");
        paused.spec.paused = Some(true);
        assert!(matches!(
            plan(&Observed { cluster: &paused, claim: None, address: VipAddress::Pending }),
            Step::Nothing(_)
        ));
        let plain = cluster("wl");
        assert!(matches!(
            plan(&Observed { cluster: &plain, claim: None, address: VipAddress::Pending }),
            Step::Nothing(_)
        ));
    }

    #[test]
    fn deletion_releases_the_claim_before_the_finalizer_goes() {
        let mut c = with_host(opted_in("true"), "10.0.0.5");
        c.metadata.deletion_timestamp = Some(Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH));
        let mut vip = claim("wl-control-plane-vip", "cluster-api-vips");
        assert!(matches!(
            plan(&Observed { cluster: &c, claim: Some(&vip), address: ip("10.0.0.5") }),
            Step::DeleteClaim(_)
        ));
        vip.metadata.deletion_timestamp = c.metadata.deletion_timestamp.clone();
        assert!(matches!(
            plan(&Observed { cluster: &c, claim: Some(&vip), address: ip("10.0.0.5") }),
            Step::Nothing(_)
        ));
        assert_eq!(plan(&Observed { cluster: &c, claim: None, address: VipAddress::Pending }), Step::DropFinalizer);
    }

    #[test]
    fn a_claim_whose_address_is_not_known_is_never_released_for_the_endpoint() {
        // After a restart the claim is listed before its IPAddress; an IPAddress deleted by hand
        // is made again. Either way the endpoint may well be this very claim's address.
        let c = with_host(opted_in("true"), "10.0.0.5");
        let vip = claim("wl-control-plane-vip", "cluster-api-vips");
        for address in [VipAddress::Unseen, VipAddress::Pending] {
            let step = plan(&Observed { cluster: &c, claim: Some(&vip), address });
            assert!(matches!(step, Step::Nothing(_)), "{address:?}: {step:?}");
        }
        // Once seen, its own address is kept and another one released.
        assert!(matches!(
            plan(&Observed { cluster: &c, claim: Some(&vip), address: ip("10.0.0.5") }),
            Step::Nothing(_)
        ));
        let other = plan(&Observed { cluster: &c, claim: Some(&vip), address: ip("10.0.0.6") });
        assert!(matches!(&other, Step::DeleteClaim(why) if why.contains("10.0.0.6")), "{other:?}");
    }

    #[test]
    fn an_endpoint_found_to_be_the_vip_gets_the_finalizer_even_unfinalized() {
        let mut c = with_host(opted_in("true"), "fd00::5");
        c.metadata.finalizers = None;
        let vip = claim("wl-control-plane-vip", "cluster-api-vips");
        // The same address, written another way, is the same host.
        let step = plan(&Observed { cluster: &c, claim: Some(&vip), address: ip("fd00:0::5") });
        assert_eq!(step, Step::AddFinalizer);
    }
}
