//! CEL rules the API server checks on every pool create and update, so that a bad pool is
//! refused with a message naming the field, without a webhook or cert-manager.
//!
//! Each rule is guarded so that it only speaks for its own problem: when an entry is not an IP
//! address at all, only the "not a valid entry" rule fails, not every rule that would trip over
//! it. What CEL cannot see (addresses in use, a range written backwards, overlap with other pools)
//! is reported by the pool controller as `Ready=False` and an Event instead.

use kube::core::{Message, Rule};

/// CEL: `e` is a single IP, a CIDR, or a range `a-b` of two IPs of one family.
fn valid_entry(e: &str) -> String {
    format!(
        "(isIP({e}) || isCIDR({e}) || ({e}.split('-').size() == 2 && isIP({e}.split('-')[0]) \
         && isIP({e}.split('-')[1]) && ip({e}.split('-')[0]).family() == ip({e}.split('-')[1]).family()))"
    )
}

/// CEL: the first address of a valid entry `e`, as a string.
fn first_address(e: &str) -> String {
    format!("(isCIDR({e}) ? string(cidr({e}).ip()) : {e}.split('-')[0])")
}

/// CEL: the last address named in a valid entry `e` (a CIDR's own address; its length is checked apart).
fn last_address(e: &str) -> String {
    format!("(isCIDR({e}) ? string(cidr({e}).ip()) : {e}.split('-')[{e}.split('-').size() - 1])")
}

/// CEL: the network of address `a` under the pool's prefix.
fn network_of(a: &str) -> String {
    format!("string(cidr({a} + '/' + string(self.prefix)).masked())")
}

/// CEL: every entry of `list` is IPv4 / every one is IPv6.
fn all_v4(list: &str) -> String {
    format!("{list}.all(x, !x.contains(':'))")
}

fn entries_are_valid(field: &str) -> Rule {
    Rule::new(format!("self.all(e, {})", valid_entry("e"))).message(Message::Expression(format!(
        "'{field}: ' + self.filter(e, !{}).map(e, '\"' + e + '\"').join(', ') + ' is not a valid IP, range (a-b of one family), nor CIDR'",
        valid_entry("e")
    )))
}

fn entries_share_one_family(field: &str) -> Rule {
    Rule::new(format!("{} || self.all(x, x.contains(':'))", all_v4("self"))).message(Message::Message(format!(
        "{field}: provided addresses are of mixed IP families; list IPv4 and IPv6 entries in separate pools"
    )))
}

/// Rules on `spec.addresses` itself.
pub fn addresses_rules() -> Vec<Rule> {
    vec![
        Rule::new("size(self) > 0").message(
            "spec.addresses is required: list at least one IP address, range (a-b) or CIDR",
        ),
        entries_are_valid("spec.addresses"),
        entries_share_one_family("spec.addresses"),
    ]
}

/// Rules on `spec.excludedAddresses` itself.
pub fn excluded_rules() -> Vec<Rule> {
    vec![
        entries_are_valid("spec.excludedAddresses"),
        entries_share_one_family("spec.excludedAddresses"),
    ]
}

/// Rules across the fields of a pool spec.
pub fn spec_rules() -> Vec<Rule> {
    let addresses_ok = format!(
        "size(self.addresses) > 0 && self.addresses.all(e, {}) && ({} || self.addresses.all(x, x.contains(':')))",
        valid_entry("e"),
        all_v4("self.addresses")
    );
    let v4 = all_v4("self.addresses");
    let gateway_set = "has(self.gateway) && self.gateway != ''";
    let prefix_ok = format!("({v4} ? self.prefix <= 32 : self.prefix <= 128)");
    let base = network_of(&first_address("self.addresses[0]"));
    let in_subnet = format!(
        "self.addresses.all(e, {first} == {base} && {last} == {base} && (!isCIDR(e) || cidr(e).prefixLength() >= self.prefix))",
        first = network_of(&first_address("e")),
        last = network_of(&last_address("e")),
    );
    vec![
        Rule::new(format!("!({addresses_ok}) || {prefix_ok}"))
            .message("spec.prefix: provided prefix is not valid: an IPv4 pool takes a prefix from 0 to 32, an IPv6 pool from 0 to 128")
            .field_path(".prefix"),
        Rule::new(format!("!({gateway_set}) || isIP(self.gateway)"))
            .message("spec.gateway: provided gateway is not a valid IP address")
            .field_path(".gateway"),
        Rule::new(format!(
            "!({gateway_set}) || !isIP(self.gateway) || !({addresses_ok}) || (self.gateway.contains(':') == self.addresses[0].contains(':'))"
        ))
        .message("spec.gateway: provided gateway and addresses are of mixed IP families")
        .field_path(".gateway"),
        Rule::new(format!(
            "!has(self.excludedAddresses) || !({addresses_ok}) || self.excludedAddresses.all(x, x.contains(':') == self.addresses[0].contains(':'))"
        ))
        .message("spec.excludedAddresses: addresses and excluded addresses are of mixed IP families")
        .field_path(".excludedAddresses"),
        Rule::new(format!("!({addresses_ok}) || !{prefix_ok} || {in_subnet}"))
            .message(
                "spec.addresses: provided address belongs to a different subnet than others: every entry must lie in the network of the lowest address with spec.prefix",
            )
            .field_path(".addresses"),
    ]
}
