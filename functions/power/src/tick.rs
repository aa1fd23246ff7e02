//! A pool's tick: one chain of delayed power messages per pool that looks at every cluster of the pool in motion
//! (installing, resuming, stopping, being deprovisioned). Each link is recorded on the pool's tick item, so only the
//! live link looks ([`chain::admit`]) and a stale or duplicate one ends on arrival. A nudge that leaves its cluster
//! wanting another look makes sure the tick comes soon enough ([`ensure_tick`]). The protocol, with its pace, is
//! "One tick per pool" in docs/concepts.md.

use std::collections::BTreeMap;
use std::time::Duration;

use apiary_planner::power::chain::{self, Admission};
use apiary_planner::power::tick::{self, Tick};
use apiary_planner::power::POLL;
use apiary_planner::{Cluster, Pool, Recheck, Timestamp};
use apiary_ports::messages::PowerMessage;
use apiary_ports::on_conflict;
use apiary_ports::platform::{Machinery, Seen};
use apiary_ports::retry::{self, LostCondition};
use apiary_ports::store::{Cond, Item, Key, Write};
use apiary_ports::{Deps, Error, Result};
use chrono::TimeDelta;
use futures::StreamExt;
use tracing::Instrument;

use crate::credentials::{self, Credentials};
use crate::outcome::{Outcome, Received};
use crate::run::{wake_pool, Run};

/// Writes `next` over the tick item as `stored` had it (absent: `None`), conditional on that.
async fn put_tick(deps: &Deps, pool: &str, stored: Option<&Tick>, mut next: Tick) -> Result<()> {
    let cond = match stored {
        Some(t) => {
            next.rev = t.rev + 1;
            Cond::Rev(t.rev)
        }
        None => Cond::Absent,
    };
    deps.store.write(pool, vec![Write::Put(Item::Tick(Box::new(next)), cond)]).await
}

/// Sends the tick link `link` of `pool`.
async fn send_tick(deps: &Deps, pool: &str, link: Recheck) -> Result<Duration> {
    let delay = tick::wait(link.due, deps.clock.now());
    deps.queue.power(&PowerMessage::tick(pool, Some(link.token)), delay).await?;
    Ok(delay)
}

/// Makes sure `pool`'s tick comes by `want` (to look at `cluster`, when it is for one): when no tick is live, or
/// the live one is due too late, records a new link (the one it replaces as superseded, and `want` as the
/// cluster's next look) and sends it; otherwise writes nothing. Concurrent nudges race on the tick item's
/// revision: the loser re-reads and finds the winner's link soon enough.
pub async fn ensure_tick(deps: &Deps, pool: &str, cluster: Option<&str>, want: Timestamp) -> Result<()> {
    let mut live = false;
    let ensured = on_conflict!(retry::STEP, "the pool's tick", async {
        let stored = deps.store.get_tick(pool).await?;
        let tick = stored.clone().unwrap_or_default();
        let now = deps.clock.now();
        live = chain::live(&tick, now);
        let next = chain::next(&tick, Admission::Nudge, Some(want), now, deps.clock.seed());
        let Some(link) = next.send else { return Ok(()) };
        let mut due = tick.due.clone();
        due.extend(cluster.map(|c| (c.to_owned(), want)));
        let written = Tick { rev: 0, check: next.check, superseded: next.superseded, due, up: tick.up };
        put_tick(deps, pool, stored.as_ref(), written).await?;
        send_tick(deps, pool, link).await.map(drop)
    });
    match ensured {
        // Others keep bringing the tick forward: it is live, and looks at this cluster (in motion) when it comes.
        Err(e) if e.lost_condition() && live => Ok(()),
        other => other,
    }
}

/// Records in `pool`'s live tick that a nudge's look found a cluster come up ([`Tick::up`]): claimants told to
/// look after the tick's next link ([`apiary_planner::waiting::hint`]) look on their own schedule again, until a
/// reconcile has given it to one of them. Nothing to record without a live tick: no claimant is told to wait for
/// one.
pub(crate) async fn note_up(deps: &Deps, pool: &Pool) -> Result<()> {
    // Its look was before this: a note of any look since says it too (installs ending together write it once).
    let seen = deps.clock.now();
    on_conflict!(retry::STEP, "the pool's tick", async {
        let Some(stored) = deps.store.get_tick(&pool.name).await?.filter(|t| t.check.is_some()) else {
            return Ok(());
        };
        if stored.up.is_some_and(|at| at >= seen) {
            return Ok(());
        }
        let noted = Tick { up: tick::up(&stored, true, deps.clock.now()), ..stored.clone() };
        put_tick(deps, &pool.name, Some(&stored), noted).await
    })
}

/// The tick item of a pool that is gone: deleted (a tick of a pool of the same name made later starts afresh).
pub(crate) async fn forget_tick(deps: &Deps, pool: &str) -> Result<()> {
    let Some(stored) = deps.store.get_tick(pool).await? else { return Ok(()) };
    match deps.store.write(pool, vec![Write::Delete(Key::Tick, Cond::Rev(stored.rev))]).await {
        Ok(()) | Err(Error::Conflict(_)) => Ok(()),
        Err(e) => Err(e),
    }
}

/// The clusters `ids` of `pool` as stored (those that still are), and what one look at all their machines found,
/// where the platform can look at many clusters at once; and what that look said of the credentials. A look
/// that fails leaves each cluster to ask alone. The clusters are read eventually consistently (half the read
/// units): a copy that missed a write is only ever written back on its revision, so acting on it loses the
/// condition first (before any call: the intent is written before the call) and the look reads the cluster again.
async fn look_many(
    deps: &Deps,
    pool: &Pool,
    platform: &dyn Machinery,
    ids: &[String],
) -> Result<(BTreeMap<String, Cluster>, BTreeMap<String, Seen>, Credentials)> {
    let keys: Vec<Key> = ids.iter().map(|id| Key::Cluster(id.clone())).collect();
    let mut read = BTreeMap::new();
    for item in deps.store.get_many(&pool.name, &keys).await? {
        if let Item::Cluster(c) = item {
            read.insert(c.id.clone(), *c);
        }
    }
    let mut creds = Credentials::Untried;
    if read.is_empty() {
        return Ok((read, BTreeMap::new(), creds));
    }
    let clusters: Vec<Cluster> = read.values().cloned().collect();
    let answer = platform.look_many(&pool.name, &pool.spec, &clusters, deps.clock.now()).await;
    creds.saw(&answer);
    let seen = match answer {
        Ok(seen) => seen.unwrap_or_default(),
        Err(e) => {
            tracing::warn!(error = %e, clusters = clusters.len(), "a look at many clusters failed; each is asked alone");
            BTreeMap::new()
        }
    };
    Ok((read, seen, creds))
}

/// The clusters a tick looked at, each with when it wants its next look.
type Looked = Vec<(String, Option<Timestamp>)>;

/// What one look of a tick came to.
struct Look {
    /// The cluster.
    id: String,
    /// When it wants its next look (`None`: nothing left to do).
    want: Option<Timestamp>,
    /// What the platform's answers said of the pool's credentials.
    creds: Credentials,
    /// Why the pool must reconcile, if it must.
    wake: Option<&'static str>,
    /// The cluster was written.
    written: bool,
    /// The look found it come up.
    came_up: bool,
}

/// One look at cluster `id` for its pool's tick. A look that fails is tried again by the next tick, after
/// [`POLL`]: it never stops the tick's other looks.
async fn look(
    deps: &Deps,
    pool: &Pool,
    platform: &dyn Machinery,
    id: String,
    (preread, seen): (Option<Cluster>, Option<Seen>),
) -> Look {
    let mut run = Run::new(deps, pool, platform, PowerMessage::nudge(pool.name.clone(), id.clone()));
    (run.preread, run.seen) = (preread, seen);
    let span = tracing::info_span!("look", cluster = %id);
    let want = match run.drive().instrument(span).await {
        Ok(want) => {
            let now = deps.clock.now();
            want.map(|w| tick::aligned(now + w, now))
        }
        Err(e) => {
            tracing::warn!(cluster = %id, error = %e, "a tick's look failed; the next tick looks again");
            Some(deps.clock.now() + POLL)
        }
    };
    Look { id, want, creds: run.creds, wake: run.wake, written: run.outcome.written, came_up: run.outcome.came_up }
}

/// The looks a tick takes: at the clusters in motion whose look is due, concurrently; what they found goes in
/// `outcome`, and the pool is reconciled when one asks. The clusters in motion, and each one looked at with when
/// it wants its next look.
async fn looks(
    deps: &Deps,
    pool: &Pool,
    platform: &dyn Machinery,
    tick: &Tick,
    admission: Admission,
    outcome: &mut Outcome,
) -> Result<(Vec<String>, Looked)> {
    let moving = deps.store.moving(&pool.name).await?;
    let hurry = tick::hurried(admission, pool.status.pending_claims);
    let ids = tick::looks(tick, &moving, deps.clock.now(), hurry);
    let (mut read, mut seen, mut creds) = look_many(deps, pool, platform, &ids).await?;
    let looks = futures::stream::iter(ids).map(|id| {
        let found = (read.remove(&id), seen.remove(&id));
        look(deps, pool, platform, id, found)
    });
    let results: Vec<_> = looks.buffer_unordered(tick::CONCURRENT_LOOKS).collect().await;
    let mut looked = Vec::new();
    let mut wake = None;
    for l in results {
        creds = creds.merge(l.creds);
        wake = wake.or(l.wake);
        outcome.written |= l.written;
        outcome.came_up |= l.came_up;
        looked.push((l.id, l.want));
    }
    credentials::record(deps, pool, &creds).await;
    if let Some(reason) = wake {
        wake_pool(deps, &pool.name, reason).await?;
        outcome.woke_pool = true;
    }
    outcome.looked = looked.iter().map(|(id, _)| id.clone()).collect();
    Ok((moving, looked))
}

/// The pool's tick: looks at the clusters in motion whose look is due, records their next looks and carries the
/// chain on to the earliest: in its own message, put back in the queue, while that has receives to spare
/// ([`chain::carries_on`]), or else in a new one. A lost condition on the tick item re-reads it and records again
/// (the looks are not taken twice); a link found stale then ends without sending.
pub(crate) async fn run(
    deps: &Deps,
    pool: &Pool,
    platform: &dyn Machinery,
    msg: &PowerMessage,
    received: Option<Received<'_>>,
) -> Result<Outcome> {
    let mut outcome = Outcome::default();
    // The looks taken, kept across a lost condition on the tick item.
    let mut done: Option<(Vec<String>, Looked)> = None;
    // Whether the chain ended here (no next link).
    let ended = on_conflict!(retry::STEP, "the pool's tick", async {
        let stored = deps.store.get_tick(&pool.name).await?;
        let tick = stored.clone().unwrap_or_default();
        let admission = chain::admit(&tick, msg.check);
        match admission {
            Admission::Drop => {
                outcome.dropped = true;
                return Ok(false);
            }
            Admission::Forget => {
                let forgotten = Tick { superseded: None, ..tick };
                return put_tick(deps, &pool.name, stored.as_ref(), forgotten).await.map(|()| false);
            }
            Admission::Own | Admission::Nudge => {}
        }
        let (moving, looked) = match done.take() {
            Some(taken) => taken,
            None => looks(deps, pool, platform, &tick, admission, &mut outcome).await?,
        };
        let now = deps.clock.now();
        let due = tick::after(&tick, &moving, &looked);
        let max = TimeDelta::seconds(i64::from(deps.config.max_recheck_seconds));
        let want = tick::next_due(&due, &moving, now).map(|at| at.min(now + max));
        done = Some((moving, looked));
        // The live link goes on in its own message, with its own token, while the message has receives to spare.
        let back = received.filter(|r| chain::carries_on(admission, r.receives));
        let token = back.and(msg.check).unwrap_or_else(|| deps.clock.seed());
        let next = chain::next(&tick, admission, want, now, token);
        let up = tick::up(&tick, outcome.came_up, now);
        let written = Tick { rev: tick.rev, check: next.check, superseded: next.superseded, due, up };
        let unchanged = stored.as_ref() == Some(&written) || (stored.is_none() && written == Tick::default());
        let back = back.filter(|_| next.send.is_some());
        if unchanged && back.is_none() {
            return Ok(false);
        }
        if !unchanged {
            put_tick(deps, &pool.name, stored.as_ref(), written).await?;
        }
        match (next.send, back) {
            (Some(link), Some(back)) => {
                // Put back until the link is due. With the tick item unchanged, this is an early copy of the live
                // link (SQS delivers some messages twice): it comes back then too, and the chain's next new message
                // ends whichever copy is left.
                let delay = tick::wait(link.due, deps.clock.now());
                deps.queue.return_power(back.receipt, delay).await?;
                (outcome.recheck, outcome.returned) = (Some(delay), true);
            }
            // The event source mapping deletes this link's message when the run ends. Killed before that, the
            // message comes back with a token the tick no longer holds, and ends on arrival.
            (Some(link), None) => outcome.recheck = Some(send_tick(deps, &pool.name, link).await?),
            (None, _) => {}
        }
        Ok(next.check.is_none())
    })?;
    if ended && !deps.store.moving(&pool.name).await?.is_empty() {
        // A cluster began moving after this tick read the index, and its nudge read the tick before it ended:
        // start it again. (A nudge that reads the tick after it ended starts it itself.)
        ensure_tick(deps, &pool.name, None, deps.clock.now() + tick::MIN_GAP).await?;
    }
    Ok(outcome)
}
