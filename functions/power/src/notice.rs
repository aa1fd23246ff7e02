//! Claim notifications ([`apiary_ports::notify`]): one attempt to deliver one to one of the pool's hooks, and the
//! pass over the pool's trail that sends what no writer did.

use apiary_planner::events::EventType;
use apiary_planner::notify::{body, hearers, kind_of, retry_after, with_notice, NoticeKind};
use apiary_planner::{Cluster, Pool};
use apiary_ports::messages::{NoticeMessage, PowerMessage};
use apiary_ports::notify::{attempt_entry, first_cursor, undelivered, PASS_LAG, PASS_PAGE, PASS_PAGES};
use apiary_ports::queue::MAX_DELAY;
use apiary_ports::store::{event_sort_key, time_key, Cond, Item, Key, Notified, Write, EVENT_SHARDS};
use apiary_ports::{Deps, Error, Result};

/// What became of one attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Attempted {
    /// The receiver answered 2xx.
    Delivered,
    /// It failed; the next attempt is sent.
    Failed,
    /// The last attempt failed: the trail keeps the notification.
    DeadLettered,
    /// Not made: not due yet (sent again for the rest of its wait).
    Skipped,
}

/// Makes the attempt `notice` asks for, to the hook of `pool` it names (as the pool named it when the event was
/// sent: no read of the pool): posts the notification, tells the trail, and after a failure sends the next attempt
/// (or, after the last, leaves the notification in the trail whole).
pub async fn deliver(deps: &Deps, pool: &str, notice: &NoticeMessage) -> Result<Attempted> {
    let now = deps.clock.now();
    if let Some(due) = notice.due.filter(|due| *due > now) {
        // Waited as long as a message can; the rest now.
        let wait = (due - now).to_std().unwrap_or_default();
        deps.queue.power(&PowerMessage::deliver(pool, notice.clone()), wait.min(MAX_DELAY)).await?;
        return Ok(Attempted::Skipped);
    }
    let Some(kind) = kind_of(&notice.event) else { return Ok(Attempted::Skipped) };
    let hook = &notice.to;
    let Some(payload) = body(pool, &notice.event) else { return Ok(Attempted::Skipped) };
    let payload = serde_json::to_vec(&payload)?;
    let id = event_sort_key(&notice.event);
    let notifier = deps.platforms.notifier()?;
    let answer = notifier.post(pool, hook, &id, now.timestamp(), &payload).await;
    let to = format!("{} to notify[{}] ({})", kind.as_str(), notice.hook, host(&hook.url));
    let failed = match &answer {
        Ok(status) if (200..300).contains(status) => None,
        Ok(status) => Some(format!("answered {status}")),
        Err(e) => Some(e.to_string()),
    };
    let (attempted, entry) = match failed {
        None => {
            let said = format!("{to}: answered {}, attempt {}", answer.unwrap_or_default(), notice.attempt);
            (Attempted::Delivered, attempt_entry(notice, EventType::NotificationDelivered, now).saying(said))
        }
        Some(why) => match retry_after(notice.attempt) {
            Some(wait) => {
                let next = NoticeMessage { attempt: notice.attempt + 1, due: Some(now + wait), ..notice.clone() };
                let delay = wait.to_std().unwrap_or_default().min(MAX_DELAY);
                deps.queue.power(&PowerMessage::deliver(pool, next), delay).await?;
                let said = format!(
                    "{to}: attempt {} failed ({why}); tried again in {}",
                    notice.attempt,
                    apiary_planner::duration::format(wait)
                );
                (Attempted::Failed, attempt_entry(notice, EventType::NotificationFailed, now).saying(said))
            }
            None => {
                let said = format!("{to}: the last attempt ({}) failed ({why}); kept here", notice.attempt);
                let mut entry = attempt_entry(notice, EventType::NotificationDeadLettered, now).saying(said);
                entry.notice = notice.event.notice.clone();
                (Attempted::DeadLettered, entry)
            }
        },
    };
    if attempted == Attempted::DeadLettered {
        tracing::warn!(pool, hook = notice.hook, id, "notification dead-lettered");
    }
    // Its account in the trail; the next attempt, if any, is already sent, so an error here loses only the entry.
    if let Err(e) = deps.store.write(pool, vec![Write::Append(entry)]).await {
        tracing::warn!(pool, error = %e, "a notification's attempt not told in the trail");
    }
    Ok(attempted)
}

/// The notice of the `ClusterBroken` event among `writes` (a change of `cluster` the power function is about to
/// write), when a hook of `pool` hears it: the cluster's outputs, and its claim's owner and subjects (one read,
/// when it has a claim).
pub async fn broken(deps: &Deps, pool: &Pool, cluster: &Cluster, writes: &mut [Write]) -> Result<()> {
    let kind = NoticeKind::ClusterBroken;
    let breaking = |w: &Write| matches!(w, Write::Append(e) if e.kind == EventType::ClusterBroken);
    if hearers(&pool.spec, kind).is_empty() || !writes.iter().any(breaking) {
        return Ok(());
    }
    let claim = match &cluster.claim {
        Some(name) => deps.store.get_claim(&pool.name, name).await?,
        None => None,
    };
    for w in writes.iter_mut() {
        if let Write::Append(e) = w {
            if e.kind == EventType::ClusterBroken {
                *e = with_notice(&pool.spec, e.clone(), kind, claim.as_ref(), Some(cluster));
            }
        }
    }
    Ok(())
}

/// The host a hook's URL names, for the trail (never its path, which may carry a token).
fn host(url: &str) -> &str {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    rest.split(['/', '?', '#']).next().unwrap_or_default()
}

/// The notifications' pass over `pool`'s trail: reads each shard on from the cursor, sends the first attempt of
/// each notification that settled with no attempt in the trail, and moves the cursor on (on condition of its
/// revision: a pass that lost it to another has sent what that one sends too, which receivers drop). The number
/// of notifications it sent.
pub async fn pass(deps: &Deps, pool: &Pool) -> Result<usize> {
    if pool.spec.notify.is_empty() {
        return Ok(0);
    }
    let now = deps.clock.now();
    let stored = match deps.store.get(&pool.name, &Key::Notified).await? {
        Some(Item::Notified(n)) => Some(n),
        _ => None,
    };
    let start = stored.clone().unwrap_or_else(|| first_cursor(&pool.name, now));
    let settled = time_key(now - PASS_LAG);
    let until = time_key(now + PASS_LAG);
    let mut through = Vec::with_capacity(usize::from(EVENT_SHARDS));
    let mut sent = 0;
    for shard in 0..EVENT_SHARDS {
        let from = start.through.get(usize::from(shard)).cloned().unwrap_or_else(|| settled.clone());
        let (mut after, mut read, mut whole) = (from.clone(), vec![], false);
        for _ in 0..PASS_PAGES {
            let page = deps.store.trail_between(&pool.name, shard, &after, &until, PASS_PAGE).await?;
            let last = page.len() < PASS_PAGE;
            if let Some((key, _)) = page.last() {
                after = key.clone();
            }
            read.extend(page);
            if last {
                whole = true;
                break;
            }
        }
        let messages = undelivered(&pool.name, &pool.spec, &read, &settled);
        if !messages.is_empty() {
            deps.queue.power_now(&messages).await?;
            sent += messages.len();
        }
        // Read whole: on to what settled. Cut short: on to the last settled entry read, the rest next time.
        let last_settled = read.iter().rev().map(|(k, _)| k).find(|k| k.as_str() <= settled.as_str()).cloned();
        let next = if whole { settled.clone() } else { last_settled.unwrap_or_else(|| from.clone()) };
        through.push(next.max(from));
    }
    let cond = stored.as_ref().map_or(Cond::Absent, |n| Cond::Rev(n.rev));
    let rev = stored.map_or(1, |n| n.rev + 1);
    let cursor = Notified { pool: pool.name.clone(), through, rev };
    match deps.store.write(&pool.name, vec![Write::Put(Item::Notified(cursor), cond)]).await {
        Ok(()) | Err(Error::Conflict(_)) => {}
        Err(e) => return Err(e),
    }
    if sent > 0 {
        tracing::info!(pool = pool.name, sent, "notifications no writer sent, sent by the pass");
    }
    Ok(sent)
}
