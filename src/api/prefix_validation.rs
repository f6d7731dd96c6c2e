//! CEL rules of the prefix-pool CRDs: every rule of the in-cluster provider's prefix-pool
//! webhook that needs no other object, with its words and the field named. Each rule is guarded
//! so that it speaks only for its own problem. What CEL cannot see (sub-prefixes in use that an
//! edit leaves outside the pool) is reported by the pool controller as `outOfRange`, a condition
//! and an Event.

use kube::core::{Message, Rule};

use super::validation::entry_rules;

/// Rules on each `prefixes` entry (the API server names the entry: `spec.prefixes[1]`).
pub fn prefix_rules() -> Vec<Rule> {
    vec![
        Rule::new("isCIDR(self)")
            .message("spec.prefixes: provided entry is not a valid IPv6 CIDR (write a network such as fd00::/48)"),
        Rule::new("!isCIDR(self) || cidr(self).ip().family() == 6")
            .message("spec.prefixes: only IPv6 prefixes are supported"),
        Rule::new("!isCIDR(self) || cidr(self).masked().ip() == cidr(self).ip()")
            .message("spec.prefixes: CIDR must be network-aligned (write its network address, host bits zero)"),
    ]
}

/// Rules on `prefixes` as a list.
pub fn prefixes_rules() -> Vec<Rule> {
    vec![Rule::new("size(self) > 0").message("spec.prefixes: prefixes is required: list at least one IPv6 CIDR")]
}

/// Rules on each `excludedPrefixes` entry.
pub fn excluded_rules() -> Vec<Rule> {
    let mut rules: Vec<Rule> = entry_rules()
        .into_iter()
        .map(|rule| {
            rule.message(
                "spec.excludedPrefixes: provided entry is not a valid IP, range, nor CIDR (write an address, a range a-b \
                 of two addresses, or a CIDR)",
            )
        })
        .collect();
    rules.push(
        Rule::new("self.contains(':') || !(isIP(self) || isCIDR(self) || self.contains('-'))")
            .message("spec.excludedPrefixes: only IPv6 excluded prefixes are supported"),
    );
    rules
}

/// Rules on `allocationPrefixLength`.
pub fn allocation_length_rules() -> Vec<Rule> {
    vec![Rule::new("self == oldSelf").message("spec.allocationPrefixLength is immutable: create a new pool instead")]
}

/// Rules across the fields of the spec.
pub fn spec_rules() -> Vec<Rule> {
    let gateway_set = "has(self.gateway) && self.gateway != ''";
    let length = "(has(self.allocationPrefixLength) ? self.allocationPrefixLength : 64)";
    vec![
        Rule::new(format!("self.prefixes.all(p, !isCIDR(p) || cidr(p).prefixLength() <= {length})"))
            .message(Message::Message(
                "spec.prefixes: CIDR prefix length must be <= allocationPrefixLength (default 64)".to_owned(),
            ))
            .field_path(".prefixes"),
        Rule::new(format!("!({gateway_set}) || isIP(self.gateway)"))
            .message("spec.gateway: provided gateway is not a valid IP address")
            .field_path(".gateway"),
        Rule::new(format!("!({gateway_set}) || !isIP(self.gateway) || ip(self.gateway).family() == 6"))
            .message("spec.gateway: provided gateway must be IPv6")
            .field_path(".gateway"),
    ]
}
