//! Sets of integer values as sorted, disjoint, non-adjacent inclusive ranges (a pool
//! definition's address sets: entries, exclusions, the allocatable set).

use super::tally::Tally;

/// An inclusive range `first..=last` of integer values, `first <= last`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(super) struct Span {
    pub(super) first: u128,
    pub(super) last: u128,
}

impl Span {
    #[must_use]
    pub(super) fn new(first: u128, last: u128) -> Span {
        Span { first: first.min(last), last: first.max(last) }
    }

    #[must_use]
    pub(super) fn contains(self, value: u128) -> bool {
        self.first <= value && value <= self.last
    }

    #[must_use]
    pub(super) fn len(self) -> Tally {
        Tally::span(self.first, self.last)
    }
}

impl From<(u128, u128)> for Span {
    fn from((first, last): (u128, u128)) -> Span {
        Span::new(first, last)
    }
}

/// Sorts and merges overlapping or adjacent spans.
#[must_use]
pub(super) fn normalize(mut spans: Vec<Span>) -> Vec<Span> {
    spans.sort_unstable();
    let mut merged: Vec<Span> = Vec::with_capacity(spans.len());
    for span in spans {
        match merged.last_mut() {
            Some(last) if last.last.checked_add(1).is_none_or(|next| span.first <= next) => {
                last.last = last.last.max(span.last);
            }
            _ => merged.push(span),
        }
    }
    merged.shrink_to_fit();
    merged
}

/// `set - removed`; both normalized, and so is the result.
#[must_use]
pub(super) fn subtract(set: &[Span], removed: &[Span]) -> Vec<Span> {
    let mut result = Vec::with_capacity(set.len());
    let mut cut = removed.iter().peekable();
    for span in set {
        let mut rest = Some(*span);
        while let (Some(current), Some(hole)) = (rest, cut.peek()) {
            if hole.last < current.first {
                cut.next();
                continue;
            }
            if hole.first > current.last {
                break;
            }
            if hole.first > current.first {
                result.push(Span::new(current.first, hole.first - 1));
            }
            rest =
                hole.last.checked_add(1).filter(|next| *next <= current.last).map(|next| Span::new(next, current.last));
            if rest.is_some() {
                cut.next();
            }
        }
        result.extend(rest);
    }
    result
}

/// Whether two normalized sets share a value.
#[must_use]
pub(super) fn intersects(a: &[Span], b: &[Span]) -> bool {
    let (mut i, mut j) = (0, 0);
    while let (Some(x), Some(y)) = (a.get(i), b.get(j)) {
        if x.first.max(y.first) <= x.last.min(y.last) {
            return true;
        }
        if x.last < y.last {
            i += 1;
        } else {
            j += 1;
        }
    }
    false
}

/// Whether a normalized set contains `value`, in O(log n).
#[must_use]
pub(super) fn contains(set: &[Span], value: u128) -> bool {
    let after = set.partition_point(|span| span.first <= value);
    after.checked_sub(1).and_then(|index| set.get(index)).is_some_and(|span| span.contains(value))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spans(list: &[(u128, u128)]) -> Vec<Span> {
        list.iter().map(|&(a, b)| Span::new(a, b)).collect()
    }

    #[test]
    fn normalize_merges_overlapping_and_adjacent_spans_in_any_order() {
        let merged = normalize(spans(&[(20, 25), (1, 10), (5, 15), (16, 16), (30, 30)]));
        assert_eq!(merged, spans(&[(1, 16), (20, 25), (30, 30)]));
        let top = normalize(spans(&[(u128::MAX, u128::MAX), (0, u128::MAX - 1)]));
        assert_eq!(top, spans(&[(0, u128::MAX)]));
    }

    #[test]
    fn subtract_cuts_holes_at_edges_and_inside() {
        let set = spans(&[(0, 10), (20, 30), (40, 40)]);
        let removed = spans(&[(0, 0), (5, 6), (10, 22), (30, 45)]);
        assert_eq!(subtract(&set, &removed), spans(&[(1, 4), (7, 9), (23, 29)]));
        let all = spans(&[(0, u128::MAX)]);
        assert_eq!(subtract(&all, &spans(&[(0, 0), (u128::MAX, u128::MAX)])), spans(&[(1, u128::MAX - 1)]));
        assert_eq!(subtract(&all, &all), Vec::new());
    }

    #[test]
    fn intersects_and_contains_agree_with_the_spans() {
        let a = spans(&[(0, 10), (20, 30)]);
        let b = spans(&[(5, 25), (30, 31)]);
        assert!(intersects(&a, &b));
        assert!(!intersects(&a, &spans(&[(11, 19), (31, 40)])));
        assert!(contains(&a, 0) && contains(&a, 25) && !contains(&a, 15) && !contains(&a, 31));
    }
}
