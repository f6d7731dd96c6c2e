//! The fault plan (no client required): which fault starts when and lasts how long, drawn from
//! the seed alone. Every kind appears once early in the run, in a seeded order, then kinds are
//! drawn at random; starts are a few seconds apart and faults last longer than that, so they
//! overlap. Every fault ends before the chaos does.

use std::fmt;
use std::time::Duration;

use crate::rng::Rng;

/// Which replica a fault hits, resolved when it starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// The replica the Lease names then.
    Leader,
    /// A replica the Lease does not name.
    Standby,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// SIGKILL, then started again once the fault ends.
    Kill(Target),
    /// SIGSTOP, then SIGCONT.
    Freeze(Target),
    /// Its proxy stops forwarding (silence), then heals.
    Blackhole(Target),
    /// Its proxy resets every connection, then heals.
    Refuse(Target),
    /// Its proxy holds every answer of the API server for this many milliseconds, then
    /// forwards at once again.
    Slow(Target, u64),
    /// kube-apiserver SIGKILLed, started again once the fault ends.
    ApiServerRestart,
    /// etcd SIGKILLed, started again once the fault ends.
    EtcdRestart,
    /// etcd compacted at its current revision.
    Compaction,
    /// A stand-by started again with its clock this many seconds ahead; back to the true
    /// clock once the fault ends.
    Skew(i64),
    /// A stand-by started again and sent SIGTERM while it starts up, then started for good.
    TermAtStartup,
}

impl Kind {
    /// One of every kind, for the first round.
    fn all(rng: &mut Rng) -> Vec<Kind> {
        let mut kinds = vec![
            Kind::Kill(Target::Leader),
            Kind::Kill(Target::Standby),
            Kind::Freeze(Target::Leader),
            Kind::Freeze(Target::Standby),
            Kind::Blackhole(Target::Leader),
            Kind::Refuse(Target::Leader),
            Kind::Slow(Target::Leader, rng.between(200, 1500)),
            Kind::ApiServerRestart,
            Kind::EtcdRestart,
            Kind::Compaction,
            Kind::Skew(rng.between(3, 30) as i64),
            Kind::TermAtStartup,
        ];
        rng.shuffle(&mut kinds);
        kinds
    }

    /// A kind at random: replica faults often, control-plane restarts seldom.
    fn drawn(rng: &mut Rng) -> Kind {
        let target = if rng.percent(60) { Target::Leader } else { Target::Standby };
        match rng.below(100) {
            0..=14 => Kind::Kill(target),
            15..=29 => Kind::Freeze(target),
            30..=42 => Kind::Blackhole(target),
            43..=52 => Kind::Refuse(target),
            53..=64 => Kind::Slow(target, rng.between(200, 1500)),
            65..=69 => Kind::ApiServerRestart,
            70..=74 => Kind::EtcdRestart,
            75..=82 => Kind::Compaction,
            83..=91 => Kind::Skew(rng.between(3, 30) as i64),
            _ => Kind::TermAtStartup,
        }
    }

    /// How long this kind lasts, drawn.
    fn duration(self, rng: &mut Rng) -> Duration {
        match self {
            Kind::Compaction => Duration::ZERO,
            Kind::ApiServerRestart | Kind::EtcdRestart => rng.seconds(2.0, 8.0),
            Kind::TermAtStartup => rng.seconds(0.1, 1.5),
            Kind::Skew(_) => rng.seconds(10.0, 30.0),
            _ => rng.seconds(3.0, 15.0),
        }
    }
}

impl Kind {
    /// Its name without the drawn figures, to count faults by kind.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Kill(Target::Leader) => "SIGKILL leader",
            Kind::Kill(Target::Standby) => "SIGKILL stand-by",
            Kind::Freeze(Target::Leader) => "SIGSTOP leader",
            Kind::Freeze(Target::Standby) => "SIGSTOP stand-by",
            Kind::Blackhole(_) => "blackhole",
            Kind::Refuse(_) => "refused connections",
            Kind::Slow(..) => "slow responses",
            Kind::ApiServerRestart => "kube-apiserver restart",
            Kind::EtcdRestart => "etcd restart",
            Kind::Compaction => "etcd compaction",
            Kind::Skew(_) => "clock skew",
            Kind::TermAtStartup => "SIGTERM during start-up",
        }
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let who = |t: &Target| match t {
            Target::Leader => "leader",
            Target::Standby => "stand-by",
        };
        match self {
            Kind::Kill(t) => write!(f, "SIGKILL {}", who(t)),
            Kind::Freeze(t) => write!(f, "SIGSTOP {}", who(t)),
            Kind::Blackhole(t) => write!(f, "blackhole {}", who(t)),
            Kind::Refuse(t) => write!(f, "refuse {}", who(t)),
            Kind::Slow(t, ms) => write!(f, "answers to {} {ms} ms late", who(t)),
            Kind::ApiServerRestart => write!(f, "kube-apiserver restart"),
            Kind::EtcdRestart => write!(f, "etcd restart"),
            Kind::Compaction => write!(f, "etcd compaction"),
            Kind::Skew(s) => write!(f, "stand-by clock {s:+} s"),
            Kind::TermAtStartup => write!(f, "SIGTERM during start-up"),
        }
    }
}

/// One fault of the plan.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fault {
    /// Its number in the plan, for the timeline.
    pub id: usize,
    /// When it starts, from the start of the chaos.
    pub at: Duration,
    /// How long it lasts (for SIGTERM during start-up: how long after the start the SIGTERM).
    pub lasts: Duration,
    pub kind: Kind,
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "#{} {} at {:.1} s for {:.1} s", self.id, self.kind, self.at.as_secs_f64(), self.lasts.as_secs_f64())
    }
}

/// Before the first fault: the workload gets going.
const FIRST_AT: Duration = Duration::from_secs(5);
/// Control-plane restarts take a while after their end (the API server starts up): they begin
/// early enough to be over before the chaos ends.
const RESTART_TAIL: Duration = Duration::from_secs(30);

/// The plan for a chaos of `chaos`.
pub fn plan(rng: &mut Rng, chaos: Duration) -> Vec<Fault> {
    let mut first_round = Kind::all(rng).into_iter();
    let mut faults = Vec::new();
    let mut at = FIRST_AT;
    while at < chaos {
        let kind = first_round.next().unwrap_or_else(|| Kind::drawn(rng));
        let lasts = kind.duration(rng);
        let tail = if matches!(kind, Kind::ApiServerRestart | Kind::EtcdRestart) { RESTART_TAIL } else { lasts };
        if at + lasts.max(tail) <= chaos {
            faults.push(Fault { id: faults.len() + 1, at, lasts, kind });
        }
        at += rng.seconds(2.0, 9.0);
    }
    faults
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seed_gives_one_plan() {
        let chaos = Duration::from_secs(600);
        assert_eq!(plan(&mut Rng::seeded(23), chaos), plan(&mut Rng::seeded(23), chaos));
        assert_ne!(plan(&mut Rng::seeded(23), chaos), plan(&mut Rng::seeded(24), chaos));
    }

    #[test]
    fn every_fault_ends_within_the_chaos_and_some_overlap() {
        for seed in 0..50 {
            let chaos = Duration::from_secs(120);
            let faults = plan(&mut Rng::seeded(seed), chaos);
            assert!(faults.iter().all(|f| f.at + f.lasts <= chaos), "seed {seed}: {faults:?}");
            let overlapping = faults.windows(2).filter(|w| w[0].at + w[0].lasts > w[1].at).count();
            assert!(overlapping > 0, "seed {seed}: no two faults overlap");
        }
    }

    #[test]
    fn a_ten_minute_plan_has_every_kind_of_fault() {
        let faults = plan(&mut Rng::seeded(5), Duration::from_secs(600));
        let names: std::collections::BTreeSet<&str> = faults.iter().map(|f| f.kind.name()).collect();
        let every: std::collections::BTreeSet<&str> = Kind::all(&mut Rng::seeded(5)).iter().map(|k| k.name()).collect();
        assert_eq!(every.len(), 12);
        assert_eq!(names, every);
    }
}
