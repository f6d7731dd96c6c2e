use std::collections::BTreeSet;

use super::*;

fn values(container: &Container) -> Vec<u16> {
    let mut all = Vec::new();
    container.for_each_run(|first, last| all.extend(first..=last));
    all
}

fn kind(container: &Container) -> &'static str {
    match container {
        Container::Small { .. } => "small",
        Container::Array(_) => "array",
        Container::Bitmap(_) => "bitmap",
    }
}

#[test]
fn a_container_fits_in_two_words_so_sparse_chunks_cost_no_heap() {
    assert_eq!(size_of::<Container>(), 16);
    assert_eq!(Container::empty().heap_bytes(), 0);
}

#[test]
fn containers_grow_from_inline_to_array_to_bitmap_and_shrink_back() {
    let mut container = Container::empty();
    for value in 0..6 {
        assert!(container.insert(value * 3));
    }
    assert_eq!(kind(&container), "small");
    container.insert(60_000);
    assert_eq!(kind(&container), "array");
    for value in 0..5000 {
        container.insert(value);
    }
    assert_eq!(kind(&container), "bitmap");
    assert_eq!(container.len(), 5001);
    for value in 0..3000 {
        assert!(container.remove(value));
    }
    assert_eq!(kind(&container), "array");
    for value in 3000..5000 {
        assert!(container.remove(value));
    }
    assert_eq!(kind(&container), "small");
    assert_eq!(values(&container), [60_000]);
}

#[test]
fn lowest_absent_is_the_first_gap_in_every_form() {
    let mut container = Container::empty();
    assert_eq!(container.lowest_absent(), 0);
    for value in [0, 1, 2, 4] {
        container.insert(value);
    }
    assert_eq!(container.lowest_absent(), 3);
    let _ = container.insert_span(0, 99);
    assert_eq!(container.lowest_absent(), 100);
    let _ = container.insert_span(0, 9999);
    assert_eq!(kind(&container), "bitmap");
    assert_eq!(container.lowest_absent(), 10_000);
    container.remove(7777);
    assert_eq!(container.lowest_absent(), 7777);
    let _ = container.insert_span(0, u16::MAX);
    assert_eq!(container.lowest_absent(), CHUNK_SIZE);
}

#[test]
fn span_insertion_counts_only_new_values() {
    let mut container = Container::empty();
    container.insert(5);
    container.insert(50);
    assert_eq!(container.insert_span(0, 9), 9);
    assert_eq!(container.insert_span(8, 60), 50);
    assert_eq!(container.len(), 61);
    assert_eq!(container.insert_span(100, 5000), 4901);
    assert_eq!(container.insert_span(0, 5000), 39);
    assert_eq!(container.len(), 5001);
}

#[test]
fn full_except_leaves_exactly_one_hole() {
    for capacity in [1, 2, 7, 300, 4097, 4098, 5000, 65_535, CHUNK_SIZE] {
        let hole = (capacity / 2) as u16;
        let container = Container::full_except(capacity, hole);
        assert_eq!(container.len(), capacity - 1);
        assert!(!container.contains(hole));
        assert_eq!(container.lowest_absent(), u32::from(hole));
    }
}

#[test]
fn random_operations_agree_with_a_set() {
    let mut container = Container::empty();
    let mut model = BTreeSet::new();
    let mut state = 0x9e37_79b9_7f4a_7c15_u64;
    for _ in 0..200_000 {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let value = (state >> 20) as u16 % 9000;
        match state % 4 {
            0 | 1 => assert_eq!(container.insert(value), model.insert(value)),
            2 => assert_eq!(container.remove(value), model.remove(&value)),
            _ => assert_eq!(container.contains(value), model.contains(&value)),
        }
        assert_eq!(container.len() as usize, model.len());
    }
    let lowest = (0..).find(|v| !model.contains(v)).unwrap();
    assert_eq!(container.lowest_absent(), u32::from(lowest));
    assert_eq!(values(&container), model.into_iter().collect::<Vec<_>>());
}
