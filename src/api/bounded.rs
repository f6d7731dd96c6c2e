//! Messages kept within what the API server stores: a condition message longer than the CRD's
//! `maxLength` (10240 in CAPI's v1beta1 conditions) fails the whole status write, every time.

/// The longest condition message written, in bytes (so also in characters).
pub const CONDITION_MESSAGE: usize = 10_000;
/// The longest Event note written, in bytes.
pub const EVENT_NOTE: usize = 1_000;

/// `text`, cut at a character boundary to at most `max` bytes, saying how much was left out.
pub fn truncate(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let suffix = |n: usize| format!(" ... and {n} more characters");
    // The suffix is at most this long for any count that fits in a message.
    let room = max.saturating_sub(suffix(text.len()).len());
    let mut cut = room.min(text.len());
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    let left_out = text[cut..].chars().count();
    format!("{}{}", &text[..cut], suffix(left_out))
}

/// The first `shown` items joined by ", ", then "and N more" for the rest.
pub fn list(items: &[String], shown: usize) -> String {
    let mut text = items.iter().take(shown).cloned().collect::<Vec<_>>().join(", ");
    if items.len() > shown {
        text.push_str(&format!(" and {} more", items.len() - shown));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_text_is_kept_and_long_text_is_cut_within_the_bound() {
        assert_eq!(truncate("full", 10), "full");
        let long = "é".repeat(20_000);
        let cut = truncate(&long, CONDITION_MESSAGE);
        assert!(cut.len() <= CONDITION_MESSAGE, "{}", cut.len());
        assert!(cut.chars().count() < 10_240);
        let kept = cut.matches('é').count();
        assert!(cut.ends_with(&format!(" ... and {} more characters", 20_000 - kept)), "{}", &cut[cut.len() - 40..]);
    }

    #[test]
    fn long_lists_name_a_few_and_count_the_rest() {
        let items: Vec<String> = (0..8).map(|n| format!("ns/c-{n}")).collect();
        assert_eq!(list(&items[..2], 5), "ns/c-0, ns/c-1");
        assert_eq!(list(&items, 3), "ns/c-0, ns/c-1, ns/c-2 and 5 more");
    }
}
