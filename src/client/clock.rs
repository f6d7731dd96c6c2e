//! The API server's clock, as seen through the `Date` header of its responses.
//!
//! Deletion timestamps and other times the API server writes are on its clock. Comparing them with
//! the local clock lets a node whose clock runs ahead end a grace period early. Each response's
//! `Date` is a lower bound of the server's time when the response arrived (it is truncated to the
//! second and was stamped before the response travelled), so `Date - local time at arrival` is a
//! lower bound of the offset between the clocks. The clock keeps the largest of the recent bounds:
//! never ahead of the server, at most about a second behind it.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use k8s_openapi::jiff::{SignedDuration, Timestamp};

use crate::sync::lock;

/// How many recent responses the offset is taken from; a clock that is stepped shows within as
/// many responses.
const SAMPLES: usize = 32;

/// Shared, cheap to clone.
#[derive(Clone, Debug, Default)]
pub struct ServerClock {
    offsets: Arc<Mutex<VecDeque<SignedDuration>>>,
}

impl ServerClock {
    /// Notes a response whose `Date` header said `date`, received at local time `received`.
    pub fn observe(&self, date: Timestamp, received: Timestamp) {
        let mut offsets = lock(&self.offsets);
        if offsets.len() == SAMPLES {
            offsets.pop_front();
        }
        offsets.push_back(date.duration_since(received));
    }

    /// Notes a response's `Date` header value (an HTTP date), received now.
    pub fn observe_header(&self, value: &str) {
        if let Ok(date) = parse_http_date(value) {
            self.observe(date, Timestamp::now());
        }
    }

    /// How far the server's clock is ahead of the local one (negative: behind); zero before the
    /// first response.
    pub fn offset(&self) -> SignedDuration {
        let offsets = lock(&self.offsets);
        offsets.iter().copied().max().unwrap_or(SignedDuration::ZERO)
    }

    /// The server's time now, as far as recent responses tell.
    pub fn now(&self) -> Timestamp {
        self.at(Timestamp::now())
    }

    /// The server's time when the local clock reads `local`.
    pub fn at(&self, local: Timestamp) -> Timestamp {
        local.saturating_add(self.offset()).unwrap_or(local)
    }
}

/// Parses an HTTP date (`Tue, 03 Dec 2026 09:32:22 GMT`, RFC 9110's preferred form).
pub fn parse_http_date(value: &str) -> Result<Timestamp, k8s_openapi::jiff::Error> {
    k8s_openapi::jiff::fmt::rfc2822::DateTimeParser::new().parse_timestamp(value.trim())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(seconds: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + seconds).unwrap()
    }

    #[test]
    fn http_dates_parse() {
        let parsed = parse_http_date("Thu, 03 Dec 2026 09:32:22 GMT").unwrap();
        assert_eq!(parsed.to_string(), "2026-12-03T09:32:22Z");
        assert!(parse_http_date("yesterday").is_err());
    }

    #[test]
    fn before_any_response_the_local_clock_is_used() {
        let clock = ServerClock::default();
        assert_eq!(clock.at(at(0)), at(0));
    }

    #[test]
    fn a_local_clock_sixty_seconds_ahead_is_corrected_and_never_ends_up_ahead() {
        let clock = ServerClock::default();
        // The server's second was 9 and 10 when the (fast) local clock read 69.4 and 70.2.
        clock.observe(at(9), at(69).saturating_add(SignedDuration::from_millis(400)).unwrap());
        clock.observe(at(10), at(70).saturating_add(SignedDuration::from_millis(200)).unwrap());
        let server_now = clock.at(at(70).saturating_add(SignedDuration::from_millis(200)).unwrap());
        assert!(server_now <= at(10).saturating_add(SignedDuration::from_millis(1000)).unwrap());
        assert!(server_now >= at(9).saturating_add(SignedDuration::from_millis(800)).unwrap(), "{server_now}");
    }

    #[test]
    fn a_slow_local_clock_is_moved_forward() {
        let clock = ServerClock::default();
        clock.observe(at(100), at(40));
        assert_eq!(clock.at(at(41)), at(101));
    }

    #[test]
    fn old_samples_age_out_so_a_stepped_clock_is_followed() {
        let clock = ServerClock::default();
        clock.observe(at(100), at(0));
        for _ in 0..SAMPLES {
            clock.observe(at(10), at(10));
        }
        assert_eq!(clock.offset(), SignedDuration::ZERO);
    }
}
