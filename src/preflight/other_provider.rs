//! Whether another IPAM provider runs: its leader Lease held and renewed (client required for
//! [`read`]; [`held`] and [`LeaseCheck::of`] are pure). Preflight looks once, so unlike the
//! controller it compares the Lease's `renewTime` plus `leaseDurationSeconds` with the local
//! clock. A Lease that does not exist means no other provider; a Lease that cannot be read means
//! the check could not be done, and preflight says so.

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::Client;
use kube::api::Api;
use serde::Serialize;

use crate::client::api_errors::describe;

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

/// Another provider's Lease that preflight could not read: whether that provider runs is unknown.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct UncheckedLease {
    /// `NAMESPACE/NAME` of the Lease.
    pub lease: String,
    /// Why it could not be read: the API server's message, code and reason.
    pub error: String,
}

/// What preflight found of another provider's Lease.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum LeaseCheck {
    /// The Lease does not exist, names no holder, or was not renewed within its duration.
    Free,
    /// Held and renewed: the other provider runs.
    Held(OtherProvider),
    /// The Lease could not be read (anything but 404 Not Found): the check was not done.
    Unchecked(UncheckedLease),
}

/// The holder of `spec`, if it names one and its last renewal is less than a lease duration old.
pub(crate) fn held(spec: &LeaseSpec, now: Timestamp) -> Option<String> {
    let holder = spec.holder_identity.clone().filter(|h| !h.is_empty())?;
    let renewed = spec.renew_time.as_ref()?.0;
    let duration = SignedDuration::from_secs(i64::from(spec.lease_duration_seconds.unwrap_or(0)));
    (renewed + duration > now).then_some(holder)
}

impl LeaseCheck {
    /// What the answer to reading `lease` (`NAMESPACE/NAME`) means at `now`: `Ok(None)` is a
    /// Lease that does not exist.
    pub(crate) fn of(lease: &str, read: Result<Option<Lease>, kube::Error>, now: Timestamp) -> LeaseCheck {
        let found = match read {
            Ok(found) => found,
            Err(error) => {
                return LeaseCheck::Unchecked(UncheckedLease { lease: lease.to_owned(), error: describe(&error) });
            }
        };
        let Some(spec) = found.and_then(|l| l.spec) else {
            return LeaseCheck::Free;
        };
        match held(&spec, now) {
            Some(holder) => {
                let renewed = spec.renew_time.map(|t| t.0.to_string()).unwrap_or_default();
                LeaseCheck::Held(OtherProvider { lease: lease.to_owned(), holder, renewed })
            }
            None => LeaseCheck::Free,
        }
    }
}

/// Reads `lease` (`NAMESPACE/NAME`) once, and says what it means at `now`.
pub(crate) async fn read(client: &Client, lease: &str, now: Timestamp) -> LeaseCheck {
    let Some((namespace, name)) = lease.split_once('/') else {
        let error = format!("{lease:?} is not NAMESPACE/NAME");
        return LeaseCheck::Unchecked(UncheckedLease { lease: lease.to_owned(), error });
    };
    let api: Api<Lease> = Api::namespaced(client.clone(), namespace);
    LeaseCheck::of(lease, api.get_opt(name).await, now)
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

    #[test]
    fn a_lease_that_cannot_be_read_is_a_check_not_done_never_a_free_lease() {
        let now = Timestamp::from_second(1000).unwrap();
        let lease = "capi-ipam-in-cluster-system/in-cluster";
        for code in [403, 401, 500, 503] {
            let refused = kube::core::Status::failure("no", "Refused").with_code(code).boxed();
            match LeaseCheck::of(lease, Err(kube::Error::Api(refused)), now) {
                LeaseCheck::Unchecked(unchecked) => {
                    assert_eq!(unchecked.lease, lease);
                    assert!(unchecked.error.contains(&code.to_string()), "{code}: {}", unchecked.error);
                }
                other => panic!("an answer {code} is no answer about the provider: {other:?}"),
            }
        }
        assert_eq!(LeaseCheck::of(lease, Ok(None), now), LeaseCheck::Free, "a Lease that does not exist");
    }
}
