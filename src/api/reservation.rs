//! The `reservations` field every pool kind carries: addresses kept for the claims that match.

use kube::core::{Message, Rule};
use schemars::{JsonSchema, Schema};
use serde::{Deserialize, Serialize};

use super::validation::{MAX_ENTRY_LENGTH, apply_rules};

/// Most reservations a pool may hold; bounds the cost of the CEL rules that compare them pairwise.
pub const MAX_RESERVATIONS: u32 = 128;
/// Longest Kubernetes object name or kind.
const MAX_NAME_LENGTH: u32 = 253;

/// An address kept for the claims that match: a claim of that name, or a claim owned by that
/// object. No other claim gets it.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = reservation_rules)]
pub struct Reservation {
    /// The reserved address; in a prefix pool, the network address of a sub-prefix (`fd00:0:0:5::`).
    #[schemars(length(min = 1, max = MAX_ENTRY_LENGTH))]
    pub address: String,

    /// The claim's name (`<vm>-0-0` for CAPV, `<machine>-net0-00-inet` for CAPMOX, `nic-<machine>-ipv4`
    /// for CAPIC, `<metal3data>-<pool>` for CAPM3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = MAX_NAME_LENGTH))]
    pub claim_name: Option<String>,

    /// With `claimName` on a global pool: the claim's namespace. Unset: any namespace (a
    /// namespaced pool only serves its own).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = MAX_NAME_LENGTH))]
    pub claim_namespace: Option<String>,

    /// The object that owns the claim (an entry of its `ownerReferences`): a `VSphereVM`,
    /// `ProxmoxMachine`, `IonosCloudMachine` or `Metal3Data`, by kind and name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<ReservationOwner>,
}

/// An owner of a claim, by kind and name.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct ReservationOwner {
    #[schemars(length(min = 1, max = MAX_NAME_LENGTH))]
    pub kind: String,
    #[schemars(length(min = 1, max = MAX_NAME_LENGTH))]
    pub name: String,
}

fn reservation_rules(schema: &mut Schema) {
    apply_rules(
        schema,
        vec![
            Rule::new("isIP(self.address)")
                .message("address must be a single IP address (a prefix pool: a sub-prefix's network address)")
                .field_path(".address"),
            Rule::new("has(self.claimName) != has(self.owner)")
                .message("set exactly one of claimName and owner: the claim the address is reserved for"),
            Rule::new("!has(self.claimNamespace) || has(self.claimName)")
                .message("claimNamespace goes with claimName")
                .field_path(".claimNamespace"),
        ],
    );
}

/// CEL: reservations `a` and `b` are for the same claims.
fn same_claims(a: &str, b: &str) -> String {
    let namespace = |r: &str| format!("(has({r}.claimNamespace) ? {r}.claimNamespace : '')");
    format!(
        "((has({a}.claimName) && has({b}.claimName) && {a}.claimName == {b}.claimName && {} == {}) \
         || (has({a}.owner) && has({b}.owner) && {a}.owner.kind == {b}.owner.kind && {a}.owner.name == {b}.owner.name))",
        namespace(a),
        namespace(b)
    )
}

/// Rules on `spec.reservations` as a list: no address twice, no claim given two of one family.
pub(crate) fn list_rules(schema: &mut Schema) {
    // Written the same: CEL's cost estimate has no bound for comparing two ip() values, so the
    // same address written two ways (IPv6) is left to the controller (`InvalidSpec`).
    let same_address = "a.address == b.address";
    apply_rules(
        schema,
        vec![
            Rule::new(format!("self.all(a, self.filter(b, {same_address}).size() <= 1)")).message(Message::Message(
                "spec.reservations: an address is reserved twice; reserve each address once".to_owned(),
            )),
            Rule::new(format!(
                "self.all(a, self.filter(b, {} && a.address.contains(':') == b.address.contains(':')).size() <= 1)",
                same_claims("a", "b")
            ))
            .message(Message::Message(
                "spec.reservations: a claim is given two addresses of one family; a claim gets one address".to_owned(),
            )),
        ],
    );
}

/// CEL rule on the spec of an IP pool: no reservation on the gateway (of either family), as
/// written; the same address written another way is left to the controller (`InvalidSpec`).
pub(crate) fn gateway_rule() -> Rule {
    let not_gateway = |gateway: &str| format!("(!has({gateway}) || self.reservations.all(r, r.address != {gateway}))");
    Rule::new(format!(
        "!has(self.reservations) || ({} && (!has(self.dualStack) || {}))",
        not_gateway("self.gateway"),
        not_gateway("self.dualStack.gateway")
    ))
    .message("spec.reservations: an address reserved is the pool's gateway, which is never handed out")
    .field_path(".reservations")
}
