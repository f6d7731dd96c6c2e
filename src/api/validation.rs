//! CEL rules the API server checks on every pool create and update, so that a bad pool is
//! refused with a message naming the field, without a webhook or cert-manager.
//!
//! Each rule is guarded so that it only speaks for its own problem: when an entry is not an IP
//! address at all, only the rule on that entry fails, not every rule that would trip over it.
//! The API server bounds what rules may cost, from `maxItems` and `maxLength`: the rules that
//! walk every entry are kept to a few cheap operations each. What CEL cannot see (addresses in
//! use, an IPv6 range written backwards, overlap with other pools) is reported by the pool
//! controller as `Ready=False` and an Event instead.

use kube::core::{Message, Rule};
use schemars::Schema;

/// Longest string a pool entry may be: an IPv6 range of two full-length addresses.
pub const MAX_ENTRY_LENGTH: u32 = 100;
/// Most entries a list of a pool may hold; bounds the cost of the CEL rules.
pub const MAX_ENTRIES: u32 = 1024;

/// Adds CEL rules to a schema.
pub(crate) fn apply_rules(schema: &mut Schema, rules: Vec<Rule>) {
    for rule in rules {
        kube::core::validate(schema, rule).expect("a CEL rule serializes to JSON");
    }
}

/// CEL: `e` is a single IP, a CIDR, or a range `a-b` of two IPs of one family.
fn valid_entry(e: &str) -> String {
    format!(
        "(isIP({e}) || isCIDR({e}) || ({e}.split('-').size() == 2 && isIP({e}.split('-')[0]) \
         && isIP({e}.split('-')[1]) && ip({e}.split('-')[0]).family() == ip({e}.split('-')[1]).family()))"
    )
}

/// CEL: the IPv4 address `ip` (dotted, already checked by `isIP`) as an integer, octet by octet.
fn ipv4_value(ip: &str) -> String {
    format!(
        "(int({ip}.split('.')[0]) * 16777216 + int({ip}.split('.')[1]) * 65536 \
         + int({ip}.split('.')[2]) * 256 + int({ip}.split('.')[3]))"
    )
}

/// CEL: `e` is not an IPv4 range `a-b` whose end lies below its start. Other entries, IPv6
/// ranges among them (CEL has no arithmetic wide enough to compare them), pass.
fn ipv4_range_in_order(e: &str) -> String {
    let (start, end) = (format!("{e}.split('-')[0]"), format!("{e}.split('-')[1]"));
    format!(
        "{e}.contains(':') || {e}.split('-').size() != 2 || !isIP({start}) || !isIP({end}) \
         || {} <= {}",
        ipv4_value(&start),
        ipv4_value(&end)
    )
}

/// CEL: the first address named in a valid entry `e` (a CIDR's own address, host bits kept).
fn first_address(e: &str) -> String {
    format!("{e}.split('/')[0].split('-')[0]")
}

/// CEL: the last address named in a valid entry `e` (a CIDR's own address; its length is checked apart).
fn last_address(e: &str) -> String {
    format!("{e}.split('/')[0].split('-')[{e}.split('/')[0].split('-').size() - 1]")
}

/// CEL: the pool's prefix as a string. `string(int)` would do, but the API server cannot bound
/// its length, and a string of unknown length makes every rule using it too costly to accept.
fn prefix_string() -> String {
    let digits: Vec<String> = (0..=128).map(|n| format!("'{n}'")).collect();
    format!("[{}][self.prefix]", digits.join(","))
}

/// CEL: the network of the pool: its first entry's first address under the pool's prefix.
fn pool_network(first: &str) -> String {
    format!("cidr({} + '/' + {})", first_address(first), prefix_string())
}

/// Rules on each entry of an address list: the API server names the entry (`spec.addresses[2]`).
pub fn entry_rules() -> Vec<Rule> {
    vec![
        Rule::new(valid_entry("self"))
            .message("must be an IP address, a range a-b of two addresses of one family, or a CIDR"),
        Rule::new(ipv4_range_in_order("self"))
            .message("provided range ends before it starts: write the lower address first (a-b with a <= b)"),
    ]
}

fn entries_share_one_family(field: &str) -> Rule {
    Rule::new("self.all(x, !x.contains(':')) || self.all(x, x.contains(':'))").message(Message::Message(format!(
        "{field}: provided addresses are of mixed IP families; list IPv4 and IPv6 entries in separate pools"
    )))
}

/// Rules on `<path>.addresses` as a list (`path` is `spec` or `spec.dualStack`).
pub fn addresses_rules(path: &str) -> Vec<Rule> {
    vec![
        Rule::new("size(self) > 0").message(Message::Message(format!(
            "{path}.addresses is required: list at least one IP address, range (a-b) or CIDR"
        ))),
        entries_share_one_family(&format!("{path}.addresses")),
    ]
}

/// Rules on `<path>.excludedAddresses` as a list.
pub fn excluded_rules(path: &str) -> Vec<Rule> {
    vec![entries_share_one_family(&format!("{path}.excludedAddresses"))]
}

/// Rules across the fields of one family of a pool: `spec` itself, or its `spec.dualStack`.
pub fn family_rules(path: &str) -> Vec<Rule> {
    let first = "self.addresses[0]";
    let v4 = "self.addresses.all(x, !x.contains(':'))";
    let v6 = "self.addresses.all(x, x.contains(':'))";
    let one_family = format!("size(self.addresses) > 0 && ({v4} || {v6})");
    let gateway_set = "has(self.gateway) && self.gateway != ''";
    let base = pool_network(first);
    // Entries that other rules refuse (invalid, other family than the first, prefix too long)
    // are skipped here.
    let in_subnet = format!(
        "self.addresses.all(e, !{valid} || e.contains(':') != {first}.contains(':') \
         || ({base}.containsIP({efirst}) && {base}.containsIP({elast}) && (!isCIDR(e) || cidr(e).prefixLength() >= self.prefix)))",
        valid = valid_entry("e"),
        efirst = first_address("e"),
        elast = last_address("e"),
    );
    vec![
        Rule::new(format!("!({v4}) || self.prefix <= 32"))
            .message(Message::Message(format!("{path}.prefix: provided prefix is not valid: an IPv4 pool takes a prefix from 0 to 32, an IPv6 pool from 0 to 128")))
            .field_path(".prefix"),
        Rule::new(format!("!({gateway_set}) || isIP(self.gateway)"))
            .message(Message::Message(format!("{path}.gateway: provided gateway is not a valid IP address")))
            .field_path(".gateway"),
        Rule::new(format!(
            "!({gateway_set}) || !isIP(self.gateway) || !({one_family}) || self.gateway.contains(':') == {first}.contains(':')"
        ))
        .message(Message::Message(format!("{path}.gateway: provided gateway and addresses are of mixed IP families")))
        .field_path(".gateway"),
        Rule::new(format!(
            "!has(self.excludedAddresses) || !({one_family}) || self.excludedAddresses.all(x, x.contains(':') == {first}.contains(':'))"
        ))
        .message(Message::Message(format!("{path}.excludedAddresses: addresses and excluded addresses are of mixed IP families")))
        .field_path(".excludedAddresses"),
        // A prefix outside 0-128 is refused by the schema; skipping it here keeps the digit
        // lookup in `prefix_string` in bounds, so the user sees that error alone.
        Rule::new(format!("size(self.addresses) == 0 || self.prefix < 0 || self.prefix > 128 || !{} || (!{first}.contains(':') && self.prefix > 32) || {in_subnet}", valid_entry(first)))
            .message(Message::Message(format!("{path}.addresses: provided address belongs to a different subnet than others: every entry must lie in the network of the lowest address with {path}.prefix")))
            .field_path(".addresses"),
    ]
}

/// Rules across the two families of a dual-stack pool.
pub fn spec_rules() -> Vec<Rule> {
    vec![Rule::new(
        "!has(self.dualStack) || size(self.addresses) == 0 || size(self.dualStack.addresses) == 0 || \
         (self.addresses[0].contains(':') ? self.dualStack.addresses.all(x, !x.contains(':')) : self.dualStack.addresses.all(x, x.contains(':')))",
    )
    .message("spec.dualStack.addresses must be of the other IP family than spec.addresses: IPv6 beside IPv4, or IPv4 beside IPv6")
    .field_path(".dualStack.addresses")]
}
