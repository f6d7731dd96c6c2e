//! When a spoke pool asks the hub for more blocks, and when it returns one (pure).
//!
//! A family in use keeps some free addresses at hand (half a block, at least two), so that a
//! claim seldom waits for the hub; claims waiting for room ask for as many blocks as they need.
//! A block nobody holds an address of for a while goes back, unless the family is in use and
//! would drop below its reserve. A family nobody uses gives every block back.

use std::time::Duration;

use crate::allocator::Family;
use crate::index::Room;

/// Blocks asked for and not granted yet, at most, per spoke pool and family.
pub const MAX_PENDING: usize = 32;
/// How long a block stays empty before it is returned.
pub const RETURN_AFTER: Duration = Duration::from_secs(10);

/// Free addresses a family in use keeps at hand.
pub fn reserve(block_size: u32) -> u128 {
    u128::from((block_size / 2).max(2))
}

/// How many blocks of `room`'s family to ask for now. `waiting`: claims of the pool that found
/// no room (counted for a family only while it has no free address: they may want another);
/// `pending`: blocks of the family asked for and not granted yet.
pub fn blocks_to_ask(room: Room, waiting: usize, pending: usize, block_size: u32) -> usize {
    let size = u128::from(block_size);
    let waiting = if room.free == 0 { waiting as u128 } else { 0 };
    let in_use = room.used > 0 || waiting > 0;
    if !in_use {
        return 0;
    }
    let need = waiting + reserve(block_size);
    let have = room.free + pending as u128 * size;
    if have >= need {
        return 0;
    }
    let blocks = (need - have).div_ceil(size);
    usize::try_from(blocks).unwrap_or(usize::MAX).min(MAX_PENDING.saturating_sub(pending))
}

/// Whether an empty block of `room`'s family may go back to the hub: it has been empty for
/// [`RETURN_AFTER`], and the family keeps its reserve without it (or nobody uses the family).
pub fn may_return(room: Room, empty_for: Duration, block_size: u32) -> bool {
    empty_for >= RETURN_AFTER
        && (room.used == 0 || room.free.saturating_sub(u128::from(block_size)) >= reserve(block_size))
}

/// The family of a pool's room list, if the pool has it.
pub fn room_of(rooms: &[Room], family: Family) -> Option<Room> {
    rooms.iter().copied().find(|r| r.family == family)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn room(free: u128, used: u128) -> Room {
        Room { family: Family::V4, free, used }
    }

    #[test]
    fn an_unused_family_asks_for_nothing_and_gives_every_block_back() {
        assert_eq!(blocks_to_ask(room(0, 0), 0, 0, 16), 0);
        assert!(may_return(room(16, 0), RETURN_AFTER, 16));
        assert!(!may_return(room(16, 0), RETURN_AFTER / 2, 16), "not empty for long enough");
    }

    #[test]
    fn waiting_claims_ask_for_the_blocks_they_need_less_those_on_their_way() {
        assert_eq!(blocks_to_ask(room(0, 10), 100, 0, 16), 7, "108 addresses: 7 blocks of 16");
        assert_eq!(blocks_to_ask(room(0, 10), 100, 5, 16), 2);
        assert_eq!(blocks_to_ask(room(0, 10), 10_000, 0, 16), MAX_PENDING, "capped");
        assert_eq!(blocks_to_ask(room(0, 10), 10_000, MAX_PENDING, 16), 0);
    }

    #[test]
    fn a_family_in_use_keeps_half_a_block_at_hand() {
        assert_eq!(blocks_to_ask(room(7, 9), 0, 0, 16), 1, "7 free is below the reserve of 8");
        assert_eq!(blocks_to_ask(room(8, 8), 0, 0, 16), 0);
        assert!(!may_return(room(20, 12), RETURN_AFTER, 16), "4 free left is below 8");
        assert!(may_return(room(24, 8), RETURN_AFTER, 16));
    }
}
