//! Whether another IPAM provider runs: its leader Lease held and renewed (client required for
//! [`read`]; [`held`] is pure). Preflight looks once, so unlike the controller it compares the
//! Lease's `renewTime` plus `leaseDurationSeconds` with the local clock.

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::Client;
use kube::api::Api;
use serde::Serialize;

/// Another provider's Lease, held and renewed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OtherProvider {
    /// `NAMESPACE/NAME` of the Lease.
    pub lease: String,
    pub holder: String,
    /// When the holder last renewed it (RFC 3339).
    pub renewed: String,
}

/// The holder of `spec`, if it names one and its last renewal is less than a lease duration old.
pub(crate) fn held(spec: &LeaseSpec, now: Timestamp) -> Option<String> {
    let holder = spec.holder_identity.clone().filter(|h| !h.is_empty())?;
    let renewed = spec.renew_time.as_ref()?.0;
    let duration = SignedDuration::from_secs(i64::from(spec.lease_duration_seconds.unwrap_or(0)));
    (renewed + duration > now).then_some(holder)
}

/// Reads `lease` (`NAMESPACE/NAME`): the other provider, if it is active. A Lease that does not
/// exist, or cannot be read, counts as no provider.
pub(crate) async fn read(client: &Client, lease: &str) -> Option<OtherProvider> {
    let (namespace, name) = lease.split_once('/')?;
    let api: Api<Lease> = Api::namespaced(client.clone(), namespace);
    let spec = api.get_opt(name).await.ok()??.spec?;
    let holder = held(&spec, Timestamp::now())?;
    let renewed = spec.renew_time.map(|t| t.0.to_string()).unwrap_or_default();
    Some(OtherProvider { lease: lease.to_owned(), holder, renewed })
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;

    fn spec(holder: &str, renewed: i64) -> LeaseSpec {
        LeaseSpec {
            holder_identity: Some(holder.into()),
            lease_duration_seconds: Some(15),
            renew_time: Some(MicroTime(Timestamp::from_second(renewed).unwrap())),
            ..LeaseSpec::default()
        }
    }

    #[test]
    fn a_lease_renewed_within_its_duration_is_held_and_an_older_or_unheld_one_is_not() {
        let now = Timestamp::from_second(1000).unwrap();
        assert_eq!(held(&spec("in-cluster", 990), now).as_deref(), Some("in-cluster"));
        assert_eq!(held(&spec("in-cluster", 980), now), None);
        assert_eq!(held(&spec("", 999), now), None);
    }
}
