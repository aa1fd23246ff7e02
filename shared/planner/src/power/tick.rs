//! The pool's tick: one chain of delayed messages per pool looks at every cluster of the pool that is in motion
//! (installing, resuming, stopping, being deprovisioned), instead of one chain per cluster.
//!
//! A tick reads the clusters in motion from the pool's sparse index (the store's `moving`), looks at each whose
//! next look is due ([`looks`]), records when each wants its next one ([`after`]) and sends itself the next link
//! for the earliest of them ([`next_due`]). Looks due within [`WINDOW`] of a tick are taken by it, a little early,
//! so clusters whose looks fall close together share one invocation; a look is never taken later than its step
//! asked. Looks half a minute off or more are recorded on the quarter-minute grid ([`aligned`]), so those of
//! transitions begun at any moment fall on the same points, and a link is sent to arrive at its due, never
//! before ([`wait`]). The chain is the one of [`super::chain`], carried by the pool's [`Tick`] item: a nudge (a
//! message from a reconcile, the claim API or the sweep) steps its cluster at once and starts or brings forward
//! the tick when none is live or the live one comes too late for it; at most two tick links are ever in flight
//! per pool.
//!
//! When claims begin to wait, the reconcile that finds them nudges the tick itself ([`hurry`]), and that tick looks
//! at every cluster in motion ([`hurried`]): a look set minutes away at the pool's pace may be the transition they
//! wait on.
//!
//! Nothing here is stored per cluster: a look that finds nothing new writes nothing to the cluster, and the
//! pool's one tick item carries every cluster's next look. A tick that finds nothing in motion ends the chain,
//! then reads the index once more: a cluster put in motion meanwhile, by a nudge that read the tick while it was
//! still live, starts it again.

use std::collections::BTreeMap;

use chrono::TimeDelta;
use serde::{Deserialize, Serialize};

use super::chain::{Admission, Links};
use super::POLL;
use crate::model::{Cluster, Recheck, Timestamp};

/// A look due this soon after a tick is taken by that tick.
pub const WINDOW: TimeDelta = POLL;
/// Clusters one tick looks at, at most (the most overdue first); the rest are looked at by the next tick,
/// [`MIN_GAP`] later.
pub const MAX_LOOKS: usize = 100;
/// Looks of one tick under way at once: a tick of [`MAX_LOOKS`] that each make a cloud call of a second ends in
/// some 4 s, far inside the function's minute.
pub const CONCURRENT_LOOKS: usize = 25;
/// Two ticks of a pool are at least this far apart.
pub const MIN_GAP: TimeDelta = TimeDelta::seconds(5);
/// How long the tick item keeps [`Tick::up`] at most: until a reconcile that read the pool's partition after it has
/// written the pool item ([`crate::PoolStatus::planned_at`]), the claimants of the pool look on their own schedule,
/// while it gives the cluster to the oldest claim; a reconcile that writes nothing (the cluster given to no claim)
/// leaves them so this long.
pub const UP_NEWS: TimeDelta = TimeDelta::seconds(10);

/// The pool's tick item (`TICK` in its partition): its chain, and when each cluster in motion is to be looked at
/// next.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Tick {
    /// The item's revision, for conditional writes.
    #[serde(default)]
    pub rev: u64,
    /// The live link.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check: Option<Recheck>,
    /// A superseded link that may still arrive.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub superseded: Option<Recheck>,
    /// When each cluster in motion wants its next look, as its last look asked. A cluster in motion missing here
    /// (a nudge stepped it, or it began moving otherwise) is looked at by the next tick. Kept in whole seconds
    /// (`due_seconds`, below).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty", with = "due_seconds")]
    pub due: BTreeMap<String, Timestamp>,
    /// When a look last found a cluster come up (an install or a resume done), in whole seconds, after writing it,
    /// kept for [`UP_NEWS`]: the reconcile that look asked for may be giving a waiting claim its cluster
    /// ([`crate::waiting::hint`]).
    #[serde(default, skip_serializing_if = "Option::is_none", with = "chrono::serde::ts_seconds_option")]
    pub up: Option<Timestamp>,
}

/// Whether a cluster a look found come up at `up` is still news at `now`, to a reader of a pool item whose status
/// was last written by a plan made at `planned_at`: a plan made after it was made on a partition read after the
/// cluster was written, which gave it to a waiting claim if any was to have it. Both in whole seconds (rounded
/// down), so only a plan made in a later second counts.
pub fn news(up: Option<Timestamp>, now: Timestamp, planned_at: Option<Timestamp>) -> bool {
    up.is_some_and(|up| now - up < UP_NEWS && planned_at.is_none_or(|p| p.timestamp() <= up.timestamp()))
}

/// The tick item's `due` as the table keeps it: each time in whole seconds since the epoch, rounded down. A look
/// may then come up to a second before its step asked, which a tick's [`WINDOW`] allows anyway; as a number the
/// time takes a quarter of the bytes of its text, and the item is written at every link. Times written as text
/// (by a version before this one) are read as they are.
mod due_seconds {
    use std::collections::BTreeMap;

    use serde::de::Error as _;
    use serde::{Deserialize, Deserializer, Serializer};

    use crate::model::Timestamp;

    pub fn serialize<S: Serializer>(due: &BTreeMap<String, Timestamp>, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(due.iter().map(|(id, at)| (id, at.timestamp())))
    }

    #[derive(Deserialize)]
    #[serde(untagged)]
    enum At {
        Seconds(i64),
        Text(Timestamp),
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<BTreeMap<String, Timestamp>, D::Error> {
        BTreeMap::<String, At>::deserialize(d)?
            .into_iter()
            .map(|(id, at)| {
                let at = match at {
                    At::Seconds(s) => Timestamp::from_timestamp(s, 0)
                        .ok_or_else(|| D::Error::custom(format!("due time of {id} out of range: {s}")))?,
                    At::Text(t) => t,
                };
                Ok((id, at))
            })
            .collect()
    }
}

impl Links for Tick {
    fn check(&self) -> Option<Recheck> {
        self.check
    }
    fn superseded(&self) -> Option<Recheck> {
        self.superseded
    }
}

/// The clusters a tick at `now` looks at, of those in motion (`moving`): each whose look is due by `now` +
/// [`WINDOW`], or that the tick has no look recorded for; the most overdue first (those without a record before
/// all), at most [`MAX_LOOKS`]. A tick that `hurry`s ([`hurried`]) looks at every cluster in motion.
pub fn looks(tick: &Tick, moving: &[String], now: Timestamp, hurry: bool) -> Vec<String> {
    let mut due: Vec<(Option<Timestamp>, &String)> = moving
        .iter()
        .map(|id| (tick.due.get(id).copied(), id))
        .filter(|(at, _)| hurry || at.is_none_or(|at| at <= now + WINDOW))
        .collect();
    due.sort();
    due.dedup_by(|a, b| a.1 == b.1);
    due.into_iter().take(MAX_LOOKS).map(|(_, id)| id.clone()).collect()
}

/// Whether a reconcile sends the pool's tick a nudge to hurry it: its plan has claims waiting (`pending`) where
/// the pool's status had none (`was`), and some of `clusters` was in motion already. Their looks were set at the
/// pool's pace, some minutes apart for an install; the claims wait on whichever transition ends first, so each
/// is looked at now, and from then on every poll ([`crate::Pool::power_limits`]).
pub fn hurry(was: u32, pending: u32, clusters: &[Cluster]) -> bool {
    was == 0 && pending > 0 && clusters.iter().any(super::in_progress)
}

/// Whether a tick admitted as `admission`, on a pool with `pending` claims waiting, hurries: it is a nudge (the
/// reconcile's, [`hurry`]) and claims still wait. A tick's own links never hurry, so each cluster in motion is
/// looked at once more per time claims begin to wait, not at every tick.
pub fn hurried(admission: Admission, pending: u32) -> bool {
    admission == Admission::Nudge && pending > 0
}

/// The looks recorded after a tick: each cluster it looked at (`looked`, with when its step wants the next look,
/// `None` when nothing is left to do) takes its new one; the others still in motion keep theirs; a cluster no
/// longer in motion leaves.
pub fn after(tick: &Tick, moving: &[String], looked: &[(String, Option<Timestamp>)]) -> BTreeMap<String, Timestamp> {
    let mut due: BTreeMap<String, Timestamp> =
        moving.iter().filter_map(|id| tick.due.get(id).map(|at| (id.clone(), *at))).collect();
    for (id, want) in looked {
        match want {
            Some(at) => due.insert(id.clone(), *at),
            None => due.remove(id),
        };
    }
    due
}

/// When to record a look a step wants at `want`, asked for at `now`: a look half a minute off or more is brought
/// forward onto the quarter-minute grid (whole [`WINDOW`]s since the epoch), at most a [`WINDOW`] early, so that
/// the looks of clusters whose transitions began at any moment fall on the same points: a tick at one takes those
/// due there and at the next ([`looks`]), and the pool ticks at most twice a minute while nothing is looked at
/// every poll. A sooner look (a poll's, or a timeout about to fall) is kept as asked; none is ever later.
pub fn aligned(want: Timestamp, now: Timestamp) -> Timestamp {
    if want - now < WINDOW * 2 {
        return want;
    }
    let step = WINDOW.num_seconds();
    let secs = want.timestamp();
    Timestamp::from_timestamp(secs - secs.rem_euclid(step), 0).unwrap_or(want)
}

/// The wait until `due` from `now`, in the whole seconds SQS delays a message by, rounded up: a link never
/// arrives before its due, so a look it takes on the quarter-minute grid ([`aligned`]) asks for its next one on
/// the grid too.
pub fn wait(due: Timestamp, now: Timestamp) -> std::time::Duration {
    let wait = (due - now).max(TimeDelta::zero());
    let secs = wait.num_seconds() + i64::from(wait.subsec_nanos() > 0);
    std::time::Duration::from_secs(u64::try_from(secs).unwrap_or_default())
}

/// [`Tick::up`] after a tick or a nudge at `now` whose looks found a cluster come up (`came_up`) or not: `now` when
/// one did, else the last such time while it may be news ([`UP_NEWS`]).
pub fn up(tick: &Tick, came_up: bool, now: Timestamp) -> Option<Timestamp> {
    if came_up {
        return Some(now);
    }
    tick.up.filter(|at| now - *at < UP_NEWS)
}

/// When the next tick is due, given the looks recorded (`due`) and the clusters in motion (`moving`): the
/// earliest look, and a cluster in motion without one as soon as may be; never sooner than [`MIN_GAP`] after `now`.
/// `None` when nothing is in motion: the chain ends, and the next nudge starts it again.
pub fn next_due(due: &BTreeMap<String, Timestamp>, moving: &[String], now: Timestamp) -> Option<Timestamp> {
    let unrecorded = moving.iter().any(|id| !due.contains_key(id));
    let earliest = due.values().min().copied();
    let at = if unrecorded { Some(now) } else { earliest };
    at.map(|at| at.max(now + MIN_GAP))
}

#[cfg(test)]
mod tests {
    use chrono::{TimeZone, Utc};

    use super::*;

    fn t(s: i64) -> Timestamp {
        Utc.with_ymd_and_hms(2026, 11, 26, 9, 0, 0).single().expect("time") + TimeDelta::seconds(s)
    }

    fn ids(names: &[&str]) -> Vec<String> {
        names.iter().map(|s| s.to_string()).collect()
    }

    fn tick(due: &[(&str, i64)]) -> Tick {
        Tick { due: due.iter().map(|(id, s)| (id.to_string(), t(*s))).collect(), ..Tick::default() }
    }

    #[test]
    fn looks_half_a_minute_off_fall_on_the_quarter_minute_grid_never_later_and_links_never_arrive_early() {
        // t(0) is on the grid (09:00:00).
        let now = t(7);
        assert_eq!(aligned(t(7) + POLL, now), t(22), "a poll's look, as asked");
        assert_eq!(aligned(t(7) + TimeDelta::seconds(29), now), t(36), "under half a minute, as asked");
        assert_eq!(aligned(t(37), now), t(30), "half a minute: brought forward to the grid");
        assert_eq!(aligned(t(67), now), t(60));
        assert_eq!(aligned(t(90), now), t(90), "on the grid already");
        // A tick that comes on the grid, up to a WINDOW late, asks for its looks on the grid again.
        for late in [0, 1, 14] {
            assert_eq!(aligned(t(30 + late) + TimeDelta::seconds(30), t(30 + late)), t(60), "{late} s late");
            assert_eq!(aligned(t(30 + late) + TimeDelta::minutes(1), t(30 + late)), t(90), "{late} s late");
        }
        // Whole seconds, rounded up.
        let half = TimeDelta::milliseconds(500);
        assert_eq!(wait(t(30), t(0) + half), std::time::Duration::from_secs(30));
        assert_eq!(wait(t(30), t(0)), std::time::Duration::from_secs(30));
        assert_eq!(wait(t(0), t(5)), std::time::Duration::ZERO, "overdue: at once");
    }

    #[test]
    fn a_tick_takes_the_looks_due_within_its_window_and_the_unrecorded_first() {
        let k = tick(&[("a", 0), ("b", 14), ("c", 16), ("d", 300)]);
        let moving = ids(&["a", "b", "c", "d", "new"]);
        assert_eq!(looks(&k, &moving, t(0), false), ids(&["new", "a", "b"]), "c is due after the window, d much later");
        // A cluster recorded but no longer in motion is not looked at.
        assert_eq!(looks(&k, &ids(&["b"]), t(0), false), ids(&["b"]));
        let many: Vec<String> = (0..2 * MAX_LOOKS).map(|i| format!("c{i:04}")).collect();
        assert_eq!(looks(&Tick::default(), &many, t(0), false).len(), MAX_LOOKS, "the rest wait for the next tick");
        // Hurried, every cluster in motion, the most overdue first; still not one that left.
        assert_eq!(looks(&k, &moving, t(0), true), ids(&["new", "a", "b", "c", "d"]));
        assert_eq!(looks(&k, &ids(&["d"]), t(0), true), ids(&["d"]));
        assert_eq!(looks(&Tick::default(), &many, t(0), true).len(), MAX_LOOKS);
    }

    #[test]
    fn a_tick_hurries_once_when_claims_begin_to_wait_on_clusters_in_motion() {
        let now = t(0);
        let still = Cluster { installed_at: Some(now), ..Cluster::new("s", "s", "s", now) };
        let installing = vec![still, Cluster::new("i", "i", "i", now)];
        assert!(installing.iter().any(crate::power::in_progress), "a cluster installing is in motion");
        assert!(hurry(0, 2, &installing));
        assert!(!hurry(1, 2, &installing), "claims waited already: the looks are every poll since");
        assert!(!hurry(0, 0, &installing), "no claim waits");
        let settled: Vec<_> = installing.iter().filter(|c| !crate::power::in_progress(c)).cloned().collect();
        assert!(!hurry(0, 2, &settled), "nothing in motion: the resumes the plan starts are nudged anyway");
        assert!(hurried(Admission::Nudge, 1));
        assert!(!hurried(Admission::Own, 1), "the tick's own links keep their pace");
        assert!(!hurried(Admission::Nudge, 0));
    }

    #[test]
    fn the_looks_recorded_follow_what_is_in_motion_and_what_each_step_asked() {
        let k = tick(&[("a", 0), ("b", 14), ("gone", 5)]);
        let moving = ids(&["a", "b", "new"]);
        let looked = vec![("a".to_string(), Some(t(60))), ("new".to_string(), Some(t(15)))];
        let due = after(&k, &moving, &looked);
        assert_eq!(due, tick(&[("a", 60), ("b", 14), ("new", 15)]).due, "gone left, b kept its look");
        assert_eq!(next_due(&due, &moving, t(0)), Some(t(14)));
        // A look that leaves nothing to do drops the cluster.
        let due = after(&k, &ids(&["a"]), &[("a".to_string(), None)]);
        assert!(due.is_empty());
        assert_eq!(next_due(&due, &[], t(0)), None, "nothing in motion: the chain ends");
        // A cluster in motion that no look recorded (the tick's look cap) brings the next tick as near as may be.
        assert_eq!(next_due(&tick(&[("a", 600)]).due, &ids(&["a", "b"]), t(0)), Some(t(0) + MIN_GAP));
        assert_eq!(next_due(&tick(&[("a", 1)]).due, &ids(&["a"]), t(0)), Some(t(0) + MIN_GAP), "never closer");
    }

    #[test]
    fn the_items_looks_are_kept_in_whole_seconds_and_a_text_time_is_still_read() {
        let mut k = tick(&[("a", 60)]);
        k.due.insert("b".into(), t(14) + TimeDelta::milliseconds(900));
        let text = serde_json::to_string(&k).expect("json");
        let at = t(0).timestamp();
        assert_eq!(text, format!(r#"{{"rev":0,"due":{{"a":{},"b":{}}}}}"#, at + 60, at + 14));
        let back: Tick = serde_json::from_str(&text).expect("read back");
        assert_eq!(back.due, tick(&[("a", 60), ("b", 14)]).due, "rounded down: a look comes early, never late");
        let written_before = r#"{"rev":3,"due":{"a":"2026-11-26T09:01:00.250Z","b":1795683614}}"#;
        let old: Tick = serde_json::from_str(written_before).expect("an item written as text");
        assert_eq!(old.due["a"], t(60) + TimeDelta::milliseconds(250));
        assert_eq!(old.due["b"].timestamp(), 1_795_683_614);
        let bad = serde_json::from_str::<Tick>(r#"{"due":{"a":true}}"#).expect_err("not a time");
        assert!(bad.to_string().contains("did not match any variant"), "{bad}");
    }

    #[test]
    fn a_cluster_come_up_is_news_for_a_while_in_whole_seconds() {
        let k = Tick { up: Some(t(3) + TimeDelta::milliseconds(700)), ..Tick::default() };
        let text = serde_json::to_string(&k).expect("json");
        assert_eq!(text, format!(r#"{{"rev":0,"up":{}}}"#, t(3).timestamp()));
        let k: Tick = serde_json::from_str(&text).expect("read back");
        assert_eq!(k.up, Some(t(3)));
        assert_eq!(up(&k, true, t(5)), Some(t(5)), "a look found one come up now");
        assert_eq!(up(&k, false, t(5)), Some(t(3)), "kept");
        assert_eq!(up(&k, false, t(3) + UP_NEWS), None, "no longer");
        assert_eq!(up(&Tick::default(), false, t(5)), None);
        // News until a plan made in a later second has written the pool's status.
        assert!(news(k.up, t(5), None) && news(k.up, t(5), Some(t(2))));
        assert!(news(k.up, t(5), Some(t(3) + TimeDelta::milliseconds(900))), "the same second: perhaps before it");
        assert!(!news(k.up, t(5), Some(t(4))) && !news(k.up, t(3) + UP_NEWS, None));
    }
}
