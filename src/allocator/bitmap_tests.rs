use std::collections::BTreeSet;

use super::*;

fn runs(bitmap: &OffsetBitmap) -> Vec<(u128, u128)> {
    bitmap.runs().iter().map(|s| (s.first, s.last)).collect()
}

#[test]
fn lowest_free_walks_up_through_chunks_and_full_runs() {
    let mut bitmap = OffsetBitmap::new(Tally::of(200_000));
    for expected in 0..150_000u128 {
        assert_eq!(bitmap.take_lowest(), Some(expected));
    }
    assert_eq!(bitmap.count(), Tally::of(150_000));
    assert_eq!(runs(&bitmap), [(0, 149_999)]);
    assert!(bitmap.remove(70_000));
    assert_eq!(bitmap.take_lowest(), Some(70_000));
    assert_eq!(bitmap.take_lowest(), Some(150_000));
}

#[test]
fn full_space_answers_from_the_count_and_frees_one_at_a_time() {
    let mut bitmap = OffsetBitmap::new(Tally::of(70_000));
    assert_eq!(bitmap.insert_span(Span::new(0, 69_999)), Tally::of(70_000));
    assert!(bitmap.is_full());
    assert_eq!(bitmap.take_lowest(), None);
    assert!(bitmap.remove(65_537));
    assert!(!bitmap.contains(65_537));
    assert_eq!(bitmap.take_lowest(), Some(65_537));
    assert_eq!(bitmap.take_lowest(), None);
}

#[test]
fn nearly_full_ipv6_space_finds_its_one_free_offset_without_scanning() {
    let size = Tally::of(1 << 64);
    let mut bitmap = OffsetBitmap::new(size);
    let hole = (1u128 << 63) + 12_345;
    assert_eq!(bitmap.insert_span(Span::new(0, hole - 1)), Tally::of(hole));
    assert_eq!(bitmap.insert_span(Span::new(hole + 1, (1 << 64) - 1)), Tally::of((1 << 64) - hole - 1));
    assert_eq!(bitmap.count(), Tally::of((1 << 64) - 1));
    assert!(bitmap.heap_bytes() < 20_000, "{}", bitmap.heap_bytes());
    assert_eq!(bitmap.take_lowest(), Some(hole));
    assert!(bitmap.is_full());
    assert_eq!(bitmap.take_lowest(), None);
}

#[test]
fn a_whole_ipv6_space_can_be_filled_and_emptied_by_one() {
    let all = Tally::span(0, u128::MAX);
    let mut bitmap = OffsetBitmap::new(all);
    assert_eq!(bitmap.insert_span(Span::new(0, u128::MAX)), all);
    assert!(bitmap.is_full());
    assert!(bitmap.contains(u128::MAX));
    assert!(bitmap.remove(u128::MAX));
    assert_eq!(bitmap.count(), Tally::of(u128::MAX));
    assert_eq!(bitmap.take_lowest(), Some(u128::MAX));
    assert!(bitmap.count().exceeds_u128());
}

#[test]
fn span_insertion_counts_offsets_already_set_in_partial_and_full_chunks() {
    let mut bitmap = OffsetBitmap::new(Tally::of(1 << 20));
    bitmap.insert(5);
    bitmap.insert(70_000);
    let _ = bitmap.insert_span(Span::new(200_000, 300_000));
    let added = bitmap.insert_span(Span::new(3, 400_000));
    assert_eq!(added, Tally::of(400_000 - 3 + 1 - 2 - 100_001));
    assert_eq!(bitmap.count(), Tally::of(400_000 - 3 + 1));
    assert_eq!(runs(&bitmap), [(3, 400_000)]);
    let _ = bitmap.insert_span(Span::new(0, u128::MAX));
    assert!(bitmap.is_full());
}

#[test]
fn empty_space_holds_nothing() {
    let mut bitmap = OffsetBitmap::new(Tally::ZERO);
    assert!(bitmap.is_full());
    assert_eq!(bitmap.take_lowest(), None);
    assert!(!bitmap.insert(0));
    assert!(!bitmap.remove(0));
    assert_eq!(bitmap.insert_span(Span::new(0, 9)), Tally::ZERO);
}

#[test]
fn a_short_last_chunk_fills_at_its_own_capacity() {
    let mut bitmap = OffsetBitmap::new(Tally::of(65_536 + 3));
    let _ = bitmap.insert_span(Span::new(0, 65_535));
    for expected in 65_536..65_539 {
        assert_eq!(bitmap.take_lowest(), Some(expected));
    }
    assert_eq!(bitmap.take_lowest(), None);
    assert!(bitmap.remove(65_537));
    assert_eq!(runs(&bitmap), [(0, 65_536), (65_538, 65_538)]);
}

#[test]
fn random_operations_agree_with_a_set() {
    // The model is the set of *free* offsets, so its lowest is the lowest free.
    let size = 60_000u128;
    let mut bitmap = OffsetBitmap::new(Tally::of(size));
    let mut free: BTreeSet<u128> = (0..size).collect();
    let mut state = 0x2545_f491_4f6c_dd1d_u64;
    for round in 0..40_000 {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let offset = u128::from(state >> 16) % size;
        match state % 8 {
            0..=2 => assert_eq!(bitmap.insert(offset), free.remove(&offset)),
            3 | 4 => assert_eq!(bitmap.remove(offset), free.insert(offset)),
            5 => assert_eq!(bitmap.take_lowest(), free.pop_first()),
            6 if round % 50 == 0 => {
                let span = Span::new(offset, (offset + u128::from(state % 30_000)).min(size - 1));
                let taken: Vec<u128> = free.range(span.first..=span.last).copied().collect();
                for offset in &taken {
                    free.remove(offset);
                }
                assert_eq!(bitmap.insert_span(span), Tally::of(taken.len() as u128));
            }
            _ => assert_eq!(bitmap.contains(offset), !free.contains(&offset)),
        }
        assert_eq!(bitmap.count(), Tally::of(size - free.len() as u128));
    }
    let set: Vec<u128> = bitmap.runs().iter().flat_map(|s| s.first..=s.last).collect();
    let expected: Vec<u128> = (0..size).filter(|o| !free.contains(o)).collect();
    assert_eq!(set, expected);
}
