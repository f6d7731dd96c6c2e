//! Leadership terms and allocations as replicas log them, to check that two replicas never
//! allocated at the same time.
//!
//! A replica's text log has one event a line, starting with an RFC 3339 timestamp. A term begins
//! with `became the leader` and ends with `lost the leadership` or `shutting down` (or the end
//! of the log, for a replica killed while leading). Each `IPAddress` the replica created is an
//! INFO line `allocated` with the fields `claim=`, `ip=` and `pool=`. A term's allocation window
//! runs from its first to its last allocation; windows of different replicas must not overlap.

use std::fmt;
use std::path::Path;

use anyhow::{Context as _, Result, bail};
use k8s_openapi::jiff::{SignedDuration, Timestamp};

/// One `IPAddress` a replica created.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Allocation {
    /// On the server's clock (the replica's own, less the skew it ran with).
    pub at: Timestamp,
    pub claim: String,
    pub ip: String,
    pub pool: String,
}

/// A leadership term of one replica, as its log shows it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Term {
    pub began: Option<Timestamp>,
    pub ended: Option<Timestamp>,
    pub allocations: Vec<Allocation>,
}

/// What one replica's log says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReplicaLog {
    pub replica: String,
    pub terms: Vec<Term>,
    /// Allocations logged outside any term (never right with leader election).
    pub unled: Vec<Allocation>,
}

/// The span of a term's allocations.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Window {
    pub replica: String,
    pub term: usize,
    pub first: Timestamp,
    pub last: Timestamp,
    pub count: usize,
}

impl fmt::Display for Window {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} term {}: {} allocations {} .. {}", self.replica, self.term, self.count, self.first, self.last)
    }
}

/// The value of ` key=` in a log line: up to the next space, or for `pool=` (whose value reads
/// `Kind ns/name`) up to the next field.
fn field(line: &str, key: &str) -> Option<String> {
    let start = line.find(&format!(" {key}="))? + key.len() + 2;
    let rest = &line[start..];
    let value: Vec<&str> = if key == "pool" {
        rest.split(' ').take_while(|token| !token.contains('=')).collect()
    } else {
        rest.split(' ').take(1).collect()
    };
    Some(value.join(" ")).filter(|v| !v.is_empty())
}

impl ReplicaLog {
    /// Reads a replica's log. `clock_ahead` is how far its clock ran ahead of the server's.
    pub fn parse(replica: &str, text: &str, clock_ahead: SignedDuration) -> ReplicaLog {
        let mut log = ReplicaLog { replica: replica.to_owned(), terms: Vec::new(), unled: Vec::new() };
        let mut leading = false;
        for line in text.lines() {
            let Some(at) = line.split_whitespace().next().and_then(|t| t.parse::<Timestamp>().ok()) else {
                continue;
            };
            let at = at - clock_ahead;
            if line.contains("became the leader") {
                log.terms.push(Term { began: Some(at), ..Term::default() });
                leading = true;
            } else if line.contains("lost the leadership") || line.contains("shutting down") {
                if let Some(term) = log.terms.last_mut().filter(|_| leading) {
                    term.ended = Some(at);
                }
                leading = false;
            } else if line.contains(" allocated ")
                && let (Some(claim), Some(ip)) = (field(line, "claim"), field(line, "ip"))
            {
                // The create counts when it was sent (`sent=`, on the replica's clock): an answer
                // may arrive after the term was suspended, but the fence let it out before.
                let sent = field(line, "sent").and_then(|t| t.parse::<Timestamp>().ok()).map(|t| t - clock_ahead);
                let at = sent.unwrap_or(at);
                let allocation = Allocation { at, claim, ip, pool: field(line, "pool").unwrap_or_default() };
                let in_term = |term: &&mut Term| leading || term.ended.is_some_and(|ended| at <= ended);
                match log.terms.last_mut().filter(in_term) {
                    Some(term) => term.allocations.push(allocation),
                    None => log.unled.push(allocation),
                }
            }
        }
        log
    }

    /// Reads the log file of a replica.
    pub fn read(replica: &str, path: &Path, clock_ahead: SignedDuration) -> Result<ReplicaLog> {
        let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        Ok(ReplicaLog::parse(replica, &text, clock_ahead))
    }

    /// Every allocation, in log order.
    pub fn allocations(&self) -> impl Iterator<Item = &Allocation> {
        self.terms.iter().flat_map(|t| t.allocations.iter()).chain(self.unled.iter())
    }

    /// The allocation windows of its terms (terms without allocations have none).
    pub fn windows(&self) -> Vec<Window> {
        self.terms
            .iter()
            .enumerate()
            .filter_map(|(n, term)| {
                let first = term.allocations.iter().map(|a| a.at).min()?;
                let last = term.allocations.iter().map(|a| a.at).max()?;
                Some(Window { replica: self.replica.clone(), term: n + 1, first, last, count: term.allocations.len() })
            })
            .collect()
    }
}

/// Fails when two replicas allocated at the same time (their windows overlap), or one allocated
/// outside a term. The message names the windows and the allocations inside the overlap.
pub fn check_windows(logs: &[ReplicaLog]) -> Result<()> {
    let mut found = Vec::new();
    for log in logs.iter().filter(|l| !l.unled.is_empty()) {
        found.push(format!(
            "{} allocated {} times outside a leadership term, first {:?}",
            log.replica,
            log.unled.len(),
            log.unled[0]
        ));
    }
    for (i, a) in logs.iter().enumerate() {
        for b in &logs[i + 1..] {
            for wa in a.windows() {
                for wb in b.windows() {
                    if wa.first <= wb.last && wb.first <= wa.last {
                        let from = wa.first.max(wb.first);
                        let to = wa.last.min(wb.last);
                        let inside =
                            |log: &ReplicaLog| log.allocations().filter(|x| x.at >= from && x.at <= to).count();
                        found.push(format!(
                            "allocation windows overlap from {from} to {to}: [{wa}] and [{wb}] \
                             ({} and {} allocations inside)",
                            inside(a),
                            inside(b)
                        ));
                    }
                }
            }
        }
    }
    if !found.is_empty() {
        bail!("two allocators at once:\n  {}", found.join("\n  "));
    }
    Ok(())
}

/// An allocation, who made it, and when that replica's term began.
pub type Attributed<'a> = (&'a str, &'a Allocation, Option<Timestamp>);

fn attributed(logs: &[ReplicaLog]) -> impl Iterator<Item = Attributed<'_>> {
    logs.iter().flat_map(|log| {
        log.terms
            .iter()
            .flat_map(move |term| term.allocations.iter().map(move |a| (log.replica.as_str(), a, term.began)))
    })
}

/// The first allocation logged at or after `since`, by any replica.
pub fn first_allocation_since(logs: &[ReplicaLog], since: Timestamp) -> Option<Attributed<'_>> {
    attributed(logs).filter(|(_, a, _)| a.at >= since).min_by_key(|(_, a, _)| a.at)
}

/// The first allocation of a term that began at or after `since`: the first of a new leader.
pub fn first_allocation_of_a_term_since(logs: &[ReplicaLog], since: Timestamp) -> Option<Attributed<'_>> {
    attributed(logs).filter(|(_, _, began)| began.is_some_and(|b| b >= since)).min_by_key(|(_, a, _)| a.at)
}

/// Every window, of every replica, by time.
pub fn all_windows(logs: &[ReplicaLog]) -> Vec<Window> {
    let mut windows: Vec<Window> = logs.iter().flat_map(ReplicaLog::windows).collect();
    windows.sort_by_key(|w| w.first);
    windows
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOG: &str = "\
2026-01-01T10:00:00.000000Z  INFO competing for leadership lease=ns/l identity=a-1
2026-01-01T10:00:01.000000Z  INFO became the leader: building the index, then serving claims
2026-01-01T10:00:02.000000Z  INFO reconcile{controller=\"claim\" object=ns/c-1}: allocated claim=ns/c-1 ip=10.0.0.2 pool=InClusterIPPool ns/pool
2026-01-01T10:00:03.000000Z  INFO reconcile{controller=\"claim\" object=ns/c-2}: allocated claim=ns/c-2 ip=10.0.0.3 pool=InClusterIPPool ns/pool
2026-01-01T10:00:04.000000Z  WARN lost the leadership: stopped allocating; standing by
2026-01-01T10:00:09.000000Z  INFO became the leader: building the index, then serving claims
2026-01-01T10:00:10.000000Z  INFO allocated claim=ns/c-3 ip=10.0.0.4 pool=InClusterIPPool ns/pool
";

    fn at(second: u32) -> Timestamp {
        format!("2026-01-01T10:00:{second:02}Z").parse().unwrap()
    }

    #[test]
    fn terms_and_their_allocations_are_read_from_the_log() {
        let log = ReplicaLog::parse("a", LOG, SignedDuration::ZERO);
        assert_eq!(log.terms.len(), 2);
        assert_eq!(log.terms[0].began, Some(at(1)));
        assert_eq!(log.terms[0].ended, Some(at(4)));
        assert_eq!(log.terms[1].ended, None);
        let first = &log.terms[0].allocations[0];
        assert_eq!(
            (first.claim.as_str(), first.ip.as_str(), first.pool.as_str()),
            ("ns/c-1", "10.0.0.2", "InClusterIPPool ns/pool")
        );
        let windows = log.windows();
        assert_eq!((windows[0].first, windows[0].last, windows[0].count), (at(2), at(3), 2));
        assert_eq!((windows[1].first, windows[1].last), (at(10), at(10)));
    }

    #[test]
    fn a_skewed_clock_is_taken_back_to_server_time() {
        let log = ReplicaLog::parse("a", LOG, SignedDuration::from_secs(10));
        assert_eq!(log.terms[0].began, Some(at(1) - SignedDuration::from_secs(10)));
    }

    #[test]
    fn windows_that_interleave_are_refused_and_windows_in_turn_are_not() {
        let a = ReplicaLog::parse("a", LOG, SignedDuration::ZERO);
        let in_turn = "2026-01-01T10:00:05.000000Z  INFO became the leader\n\
                       2026-01-01T10:00:06.000000Z  INFO allocated claim=ns/d ip=10.0.0.9 pool=InClusterIPPool ns/pool\n";
        let b = ReplicaLog::parse("b", in_turn, SignedDuration::ZERO);
        check_windows(&[a.clone(), b.clone()]).unwrap();
        assert_eq!(first_allocation_since(&[a.clone(), b], at(5)).map(|(r, x, _)| (r, x.at)), Some(("b", at(6))));

        let meanwhile = "2026-01-01T10:00:01.500000Z  INFO became the leader\n\
                         2026-01-01T10:00:02.500000Z  INFO allocated claim=ns/d ip=10.0.0.2 pool=InClusterIPPool ns/pool\n";
        let error = check_windows(&[a, ReplicaLog::parse("b", meanwhile, SignedDuration::ZERO)]).unwrap_err();
        assert!(error.to_string().contains("overlap"), "{error}");
    }

    #[test]
    fn an_answer_after_the_term_counts_when_its_create_was_sent_within_it() {
        let text = "2026-01-01T10:00:01.000000Z  INFO became the leader\n\
                    2026-01-01T10:00:04.000000Z  WARN lost the leadership: no renewal\n\
                    2026-01-01T10:00:05.000000Z  INFO allocated claim=ns/d ip=10.0.0.9 pool=InClusterIPPool ns/pool sent=2026-01-01T10:00:03Z\n";
        let log = ReplicaLog::parse("a", text, SignedDuration::ZERO);
        assert_eq!(log.terms[0].allocations.len(), 1);
        assert_eq!(log.terms[0].allocations[0].at, at(3));
        assert_eq!(log.terms[0].allocations[0].pool, "InClusterIPPool ns/pool");
        let late = text.replace("sent=2026-01-01T10:00:03Z", "sent=2026-01-01T10:00:04.5Z");
        let error = check_windows(&[ReplicaLog::parse("a", &late, SignedDuration::ZERO)]).unwrap_err();
        assert!(error.to_string().contains("outside a leadership term"), "{error}");
    }

    #[test]
    fn an_allocation_outside_a_term_is_refused() {
        let text = "2026-01-01T10:00:06.000000Z  INFO allocated claim=ns/d ip=10.0.0.9 pool=InClusterIPPool ns/pool\n";
        let error = check_windows(&[ReplicaLog::parse("b", text, SignedDuration::ZERO)]).unwrap_err();
        assert!(error.to_string().contains("outside a leadership term"), "{error}");
    }
}
