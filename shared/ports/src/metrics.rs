//! CloudWatch metrics in Embedded Metric Format (EMF): one JSON object per line on stdout, which Lambda's log
//! delivery turns into metrics without an API call.
//!
//! Namespace [`NAMESPACE`]; every metric has the dimension `Stack` (the deployment) and is published twice: with
//! `Pool`, for the per-pool graphs, and without, so that one alarm covers every pool of a stack.
//!
//! - Pool gauges, written by each reconcile from the plan's status: [`pool_status`] (clusters by state, those whose
//!   machines refuse to terminate, pending claims and the oldest one's wait).
//! - `ClaimAssignmentSeconds`: claim created → assigned a Running cluster ([`claim_assigned`]).
//! - `PowerTransitionSeconds`, with the dimension `Transition` (`Resume` or `Hibernate`): transition began →
//!   settled ([`power_transition`]).
//! - `NodeCertificatesApproved`, `NodeCertificatesRefused`: a resume's look at its nodes' certificate requests
//!   ([`node_certificates`]).
//!
//! The documents are built by pure functions (tested here); [`Metrics::emit`] only writes them.

use std::io::Write;

use apiary_planner::{Claim, Cluster, PoolStatus, PowerState, Snapshot, Timestamp};
use serde_json::{json, Map, Value};

/// The CloudWatch namespace of every Apiary metric.
pub const NAMESPACE: &str = "Apiary";

/// A CloudWatch unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// A number of things.
    Count,
    /// A duration.
    Seconds,
}

impl Unit {
    fn as_str(self) -> &'static str {
        match self {
            Unit::Count => "Count",
            Unit::Seconds => "Seconds",
        }
    }
}

/// One EMF document: `values` under `Stack` and `dimensions` (name, value); when `Pool` is one of them, also under
/// the same set without it, for stack-wide alarms.
pub fn document(stack: &str, dimensions: &[(&str, &str)], values: &[(&str, f64, Unit)], at: Timestamp) -> Value {
    let mut root = Map::new();
    root.insert("Stack".into(), stack.into());
    for (name, value) in dimensions {
        root.insert((*name).into(), (*value).into());
    }
    for (name, value, _) in values {
        root.insert((*name).into(), json!(value));
    }
    let mut full: Vec<&str> = vec!["Stack"];
    full.extend(dimensions.iter().map(|(n, _)| *n));
    let without_pool: Vec<&str> = full.iter().copied().filter(|n| *n != "Pool").collect();
    let sets = if without_pool.len() == full.len() { vec![full] } else { vec![full, without_pool] };
    root.insert(
        "_aws".into(),
        json!({
            "Timestamp": at.timestamp_millis(),
            "CloudWatchMetrics": [{
                "Namespace": NAMESPACE,
                "Dimensions": sets,
                "Metrics": values.iter().map(|(n, _, u)| json!({"Name": n, "Unit": u.as_str()})).collect::<Vec<_>>(),
            }],
        }),
    );
    Value::Object(root)
}

/// Seconds from `from` to `to` (never negative).
fn seconds(from: Timestamp, to: Timestamp) -> f64 {
    ((to - from).num_milliseconds().max(0) as f64) / 1000.0
}

/// The pool's gauges after a reconcile: clusters by state (from the plan's `status`), claims pending and how
/// long the oldest of them has waited (0 when none waits).
pub fn pool_status(stack: &str, snapshot: &Snapshot, status: &PoolStatus, now: Timestamp) -> Value {
    let oldest =
        snapshot.claims.iter().filter(|c| c.is_pending()).map(|c| seconds(c.created_at, now)).fold(0.0, f64::max);
    let n = |v: u32| f64::from(v);
    document(
        stack,
        &[("Pool", &snapshot.pool.name)],
        &[
            ("ClustersInstalling", n(status.installing), Unit::Count),
            ("ClustersStandby", n(status.standby), Unit::Count),
            ("ClustersReady", n(status.ready), Unit::Count),
            ("ClustersClaimed", n(status.claimed), Unit::Count),
            ("ClustersBroken", n(status.broken), Unit::Count),
            ("ClustersStale", n(status.stale), Unit::Count),
            ("ClustersDeleting", n(status.deleting), Unit::Count),
            ("ClustersDeprovisionFailing", n(status.deprovision_failing), Unit::Count),
            ("ClaimsPending", n(status.pending_claims), Unit::Count),
            ("OldestPendingClaimSeconds", oldest, Unit::Seconds),
        ],
        now,
    )
}

/// The reaper's pass over a pool: how many infraIds carry the pool's mark with no cluster of it (orphans, young
/// ones included), and how many were reaped.
pub fn orphans(stack: &str, pool: &str, found: usize, reaped: usize, at: Timestamp) -> Value {
    document(
        stack,
        &[("Pool", pool)],
        &[("OrphansFound", found as f64, Unit::Count), ("OrphansReaped", reaped as f64, Unit::Count)],
        at,
    )
}

/// A claim was assigned a Running cluster at `at`: how long it waited since it was made.
pub fn claim_assigned(stack: &str, pool: &str, claim: &Claim, at: Timestamp) -> Value {
    document(stack, &[("Pool", pool)], &[("ClaimAssignmentSeconds", seconds(claim.created_at, at), Unit::Seconds)], at)
}

/// A power transition that `before` → `after` completed, with its duration; `None` when the write did not
/// complete one (no transition was under way, it is still under way, or it ended broken).
pub fn power_transition(stack: &str, pool: &str, before: &Cluster, after: &Cluster, now: Timestamp) -> Option<Value> {
    let started = before.transition_started_at?;
    if after.transition_started_at.is_some() || after.is_broken() {
        return None;
    }
    let transition = match after.power_state? {
        PowerState::Running => "Resume",
        PowerState::Hibernating => "Hibernate",
        _ => return None,
    };
    Some(document(
        stack,
        &[("Pool", pool), ("Transition", transition)],
        &[("PowerTransitionSeconds", seconds(started, now), Unit::Seconds)],
        now,
    ))
}

/// A look at a resuming cluster's nodes approved `approved` certificate requests and left `refused` pending (seed
/// 004): `NodeCertificatesApproved` and `NodeCertificatesRefused`.
pub fn node_certificates(stack: &str, pool: &str, approved: usize, refused: usize, at: Timestamp) -> Value {
    document(
        stack,
        &[("Pool", pool)],
        &[
            ("NodeCertificatesApproved", approved as f64, Unit::Count),
            ("NodeCertificatesRefused", refused as f64, Unit::Count),
        ],
        at,
    )
}

/// Which metric series a stack publishes (its `Monitoring` parameter). CloudWatch bills each series a month
/// ($0.30 at list price), so each setting publishes only what its alarms and graphs read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Monitoring {
    /// `alarms`: the stack-wide series the template's alarms watch ([`ALARMED`]), and nothing else.
    #[default]
    Alarms,
    /// `dashboard`: every series, stack-wide, for the dashboard's graphs.
    Dashboard,
    /// `pools`: and each pool's own, some fifteen series a pool.
    Pools,
}

impl Monitoring {
    /// The setting named `name` (`alarms`, `dashboard`, `pools`).
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "alarms" => Some(Self::Alarms),
            "dashboard" => Some(Self::Dashboard),
            "pools" => Some(Self::Pools),
            _ => None,
        }
    }
}

/// The stack-wide series the template's alarms watch: broken clusters, the oldest pending claim, orphans found.
pub const ALARMED: [&str; 3] = ["ClustersBroken", "OldestPendingClaimSeconds", "OrphansFound"];

/// The wait of the oldest pending claim at or under which no pending-claims alarm fires: the template's
/// `PendingClaimAlarmSeconds` is at least this (its `MinValue`), and the alarm fires above it.
pub const PENDING_ALARM_FLOOR_SECONDS: f64 = 60.0;

/// Whether some alarm the template allows could fire on `value` of the [`ALARMED`] metric `name`: the
/// broken-clusters alarm fires at `BrokenClustersAlarmThreshold` (at least 1) and more, the orphans alarm at 1 and
/// more, the pending-claims alarm above `PendingClaimAlarmSeconds` (at least [`PENDING_ALARM_FLOOR_SECONDS`]).
/// Every alarm treats missing data as not breaching, so leaving such a value out changes no alarm's state.
pub fn could_alarm(name: &str, value: f64) -> bool {
    match name {
        "OldestPendingClaimSeconds" => value > PENDING_ALARM_FLOOR_SECONDS,
        _ => value >= 1.0,
    }
}

/// `document` as `monitoring` publishes it, or `None` when it publishes none of its series. Below
/// [`Monitoring::Pools`] the dimension sets that name `Pool` are left out; with [`Monitoring::Alarms`], every
/// metric but the [`ALARMED`] ones too, and those whose value no alarm could fire on ([`could_alarm`]): CloudWatch
/// bills a series by the hours it gets data, so a healthy stack's alarm series cost nothing. What is left out stays
/// in the document as a property of the log line (Logs Insights still reads and filters on it), not a series.
pub fn published(mut document: Value, monitoring: Monitoring) -> Option<Value> {
    if monitoring == Monitoring::Pools {
        return Some(document);
    }
    let alarmable: Vec<&str> =
        ALARMED.into_iter().filter(|name| document[*name].as_f64().is_some_and(|v| could_alarm(name, v))).collect();
    let directives = document["_aws"]["CloudWatchMetrics"].as_array_mut()?;
    for directive in directives.iter_mut() {
        if let Some(sets) = directive["Dimensions"].as_array_mut() {
            sets.retain(|set| !set.as_array().is_some_and(|names| names.iter().any(|n| n == "Pool")));
        }
        if let (Monitoring::Alarms, Some(metrics)) = (monitoring, directive["Metrics"].as_array_mut()) {
            metrics.retain(|m| m["Name"].as_str().is_some_and(|name| alarmable.contains(&name)));
        }
    }
    directives.retain(|d| d["Metrics"].as_array().is_some_and(|m| !m.is_empty()));
    (!directives.is_empty()).then_some(document)
}

/// The names of the metrics `document` publishes, each a series per dimension set.
pub fn metric_names(document: &Value) -> Vec<&str> {
    let directives = document["_aws"]["CloudWatchMetrics"].as_array().map_or(&[][..], Vec::as_slice);
    directives
        .iter()
        .flat_map(|d| d["Metrics"].as_array().into_iter().flatten())
        .filter_map(|m| m["Name"].as_str())
        .collect()
}

/// Where documents go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Sink {
    /// Standard output: on Lambda, the function's log stream, where CloudWatch extracts the metrics.
    Stdout,
    /// Appended to a file (the local runtime, whose stdout is its status screen).
    File(std::path::PathBuf),
    /// Nowhere.
    Off,
    /// Kept in memory, for tests that read what a handler reported.
    Memory(Memory),
}

/// Documents kept in memory ([`Sink::Memory`]).
#[derive(Debug, Clone, Default)]
pub struct Memory(std::sync::Arc<std::sync::Mutex<Vec<Value>>>);

impl Memory {
    /// The documents written so far.
    pub fn documents(&self) -> Vec<Value> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

impl PartialEq for Memory {
    fn eq(&self, other: &Self) -> bool {
        std::sync::Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for Memory {}

/// The metrics writer of a process.
#[derive(Debug, Clone)]
pub struct Metrics {
    /// The `Stack` dimension.
    pub stack: String,
    /// Where documents go.
    pub sink: Sink,
    /// Which series are published ([`published`]).
    pub monitoring: Monitoring,
}

impl Metrics {
    /// Writes `document` as one line, with the series [`Metrics::monitoring`] publishes; nothing when it publishes
    /// none of them. A failed write is not worth failing the handler for.
    pub fn emit(&self, document: Value) {
        let Some(document) = published(document, self.monitoring) else { return };
        let line = format!("{document}\n");
        let _ = match &self.sink {
            Sink::Stdout => std::io::stdout().lock().write_all(line.as_bytes()),
            Sink::File(path) => std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .and_then(|mut f| f.write_all(line.as_bytes())),
            Sink::Off => Ok(()),
            Sink::Memory(m) => {
                m.0.lock().unwrap_or_else(|e| e.into_inner()).push(document);
                Ok(())
            }
        };
    }
}

#[cfg(test)]
mod tests {
    use apiary_planner::{Platform, Pool, PoolSpec};
    use chrono::TimeDelta;

    use super::*;

    fn t(s: i64) -> Timestamp {
        Timestamp::from_timestamp(1_800_000_000 + s, 0).expect("time")
    }

    /// Every metric and dimension an EMF directive names must be a member of the root (the spec's validity rule).
    fn assert_valid(doc: &Value) {
        let directive = &doc["_aws"]["CloudWatchMetrics"][0];
        assert_eq!(directive["Namespace"], NAMESPACE);
        assert!(doc["_aws"]["Timestamp"].is_i64());
        for set in directive["Dimensions"].as_array().expect("dimension sets") {
            for name in set.as_array().expect("set") {
                assert!(doc[name.as_str().expect("name")].is_string(), "dimension {name} missing");
            }
        }
        for m in directive["Metrics"].as_array().expect("metrics") {
            assert!(doc[m["Name"].as_str().expect("name")].is_number(), "metric {m} missing");
        }
    }

    fn snapshot() -> Snapshot {
        let spec = PoolSpec::new(3, Platform::Fake(serde_json::from_str("{}").expect("fake platform")));
        Snapshot {
            pool: Pool {
                name: "ci".into(),
                spec,
                status: PoolStatus::default(),
                next_wake_at: None,
                deletion_requested_at: None,
                created_at: t(0),
                rev: 1,
                later: Default::default(),
            },
            clusters: vec![],
            claims: vec![],
            leases: vec![],
        }
    }

    #[test]
    fn each_monitoring_setting_publishes_only_the_series_it_reads() {
        let sets = |doc: &Value| doc["_aws"]["CloudWatchMetrics"][0]["Dimensions"].clone();
        let names = |doc: &Value| metric_names(doc).iter().map(|n| n.to_string()).collect::<Vec<_>>();
        let status = PoolStatus { broken: 2, ..PoolStatus::default() };
        let gauges = pool_status("prod", &snapshot(), &status, t(400));

        let all = published(gauges.clone(), Monitoring::Pools).expect("published");
        assert_eq!((sets(&all), names(&all).len()), (json!([["Stack", "Pool"], ["Stack"]]), 10));

        let stack = published(gauges.clone(), Monitoring::Dashboard).expect("published");
        assert_valid(&stack);
        assert_eq!((sets(&stack), names(&stack).len()), (json!([["Stack"]]), 10));
        assert_eq!((&stack["Pool"], &stack["ClustersBroken"]), (&json!("ci"), &json!(2.0)), "still in the line");

        let alarmed = published(gauges, Monitoring::Alarms).expect("published");
        assert_valid(&alarmed);
        assert_eq!(sets(&alarmed), json!([["Stack"]]));
        assert_eq!(names(&alarmed), ["ClustersBroken"], "no claim waits: no alarm could fire on the oldest's wait");
        assert_eq!(alarmed["ClustersReady"], 0.0, "a value no alarm reads stays a property of the line");
        let found = published(orphans("prod", "ci", 1, 0, t(5)), Monitoring::Alarms).expect("published");
        assert_eq!(names(&found), ["OrphansFound"]);

        // A document with nothing an alarm reads is not written at all.
        let memory = Memory::default();
        for monitoring in [Monitoring::Alarms, Monitoring::Dashboard, Monitoring::Pools] {
            let m = Metrics { stack: "prod".into(), sink: Sink::Memory(memory.clone()), monitoring };
            m.emit(claim_assigned("prod", "ci", &Claim::new("c", "me", t(0)), t(5)));
        }
        let written: Vec<Value> = memory.documents().iter().map(sets).collect();
        assert_eq!(written, vec![json!([["Stack"]]), json!([["Stack", "Pool"], ["Stack"]])]);
        assert_eq!(Monitoring::parse("dashboard"), Some(Monitoring::Dashboard));
        assert_eq!(Monitoring::parse("all"), None);
    }

    #[test]
    fn an_alarmed_series_gets_data_only_when_an_alarm_could_fire_on_it() {
        // CloudWatch bills a series by the hours it gets data. The template's alarms fire at one broken cluster or
        // more, one orphan or more, and a claim older than PendingClaimAlarmSeconds (at least 60): a value under
        // that is left out of the series (it stays in the line), and a line left with none is not written.
        let names =
            |doc: Option<Value>| doc.map(|d| metric_names(&d).iter().map(|n| n.to_string()).collect::<Vec<_>>());
        let mut waiting = snapshot();
        waiting.claims.push(Claim::new("old", "me", t(0)));
        let gauges = |snap: &Snapshot, broken, at| {
            let status = PoolStatus { broken, ..PoolStatus::default() };
            published(pool_status("prod", snap, &status, t(at)), Monitoring::Alarms)
        };
        assert_eq!(names(gauges(&snapshot(), 0, 400)), None, "a healthy pool publishes nothing");
        assert_eq!(names(gauges(&waiting, 0, PENDING_ALARM_FLOOR_SECONDS as i64)), None, "a minute's wait");
        let late = gauges(&waiting, 0, PENDING_ALARM_FLOOR_SECONDS as i64 + 1).expect("published");
        assert_eq!(names(Some(late.clone())), Some(vec!["OldestPendingClaimSeconds".to_string()]));
        assert_eq!(late["ClustersBroken"], 0.0, "still in the line");
        assert_eq!(names(gauges(&waiting, 1, 400)).map(|n| n.len()), Some(2));
        assert_eq!(names(published(orphans("prod", "ci", 0, 0, t(5)), Monitoring::Alarms)), None);
        // The dashboard draws every value, zeros included.
        let all = published(pool_status("prod", &snapshot(), &PoolStatus::default(), t(5)), Monitoring::Dashboard);
        assert_eq!(names(all).map(|n| n.len()), Some(10));
        assert_eq!(
            names(published(orphans("prod", "ci", 0, 0, t(5)), Monitoring::Dashboard)).map(|n| n.len()),
            Some(2)
        );
    }

    #[test]
    fn pool_gauges_per_pool_and_stack_wide() {
        let mut snap = snapshot();
        snap.claims.push(Claim::new("old", "me", t(100)));
        snap.claims.push(Claim::new("new", "me", t(250)));
        let mut done = Claim::new("done", "me", t(0));
        done.cluster = Some("ci-1".into());
        snap.claims.push(done);
        let status = PoolStatus { ready: 1, broken: 2, pending_claims: 2, ..PoolStatus::default() };
        let doc = pool_status("prod", &snap, &status, t(400));
        assert_valid(&doc);
        assert_eq!(doc["Pool"], "ci");
        assert_eq!(doc["Stack"], "prod");
        assert_eq!(doc["ClustersBroken"], 2.0);
        assert_eq!(doc["ClustersReady"], 1.0);
        assert_eq!(doc["ClaimsPending"], 2.0);
        assert_eq!(doc["OldestPendingClaimSeconds"], 300.0);
        assert_eq!(doc["_aws"]["CloudWatchMetrics"][0]["Dimensions"], json!([["Stack", "Pool"], ["Stack"]]));
        assert_eq!(doc["_aws"]["Timestamp"], t(400).timestamp_millis());
    }

    #[test]
    fn no_pending_claim_is_zero_seconds() {
        let doc = pool_status("prod", &snapshot(), &PoolStatus::default(), t(5));
        assert_eq!(doc["OldestPendingClaimSeconds"], 0.0);
    }

    #[test]
    fn assignment_delay_counts_from_creation() {
        let claim = Claim::new("job", "me", t(10));
        let doc = claim_assigned("prod", "ci", &claim, t(10) + TimeDelta::milliseconds(95_500));
        assert_valid(&doc);
        assert_eq!(doc["ClaimAssignmentSeconds"], 95.5);
        assert_eq!(doc["_aws"]["CloudWatchMetrics"][0]["Metrics"][0]["Unit"], "Seconds");
    }

    #[test]
    fn transition_durations_only_when_one_completes() {
        let mut before = Cluster::new("ci-1", "ci-1", "ci-1-x", t(0));
        before.installed_at = Some(t(0));
        before.power_state = Some(PowerState::WaitingForNodes);
        before.transition_started_at = Some(t(100));
        let mut after = before.clone();
        after.power_state = Some(PowerState::Running);
        after.transition_started_at = None;
        let doc = power_transition("prod", "ci", &before, &after, t(220)).expect("a resume completed");
        assert_valid(&doc);
        assert_eq!(doc["Transition"], "Resume");
        assert_eq!(doc["PowerTransitionSeconds"], 120.0);
        assert_eq!(
            doc["_aws"]["CloudWatchMetrics"][0]["Dimensions"],
            json!([["Stack", "Pool", "Transition"], ["Stack", "Transition"]])
        );

        after.power_state = Some(PowerState::Hibernating);
        let doc = power_transition("prod", "ci", &before, &after, t(130)).expect("a hibernation completed");
        assert_eq!(doc["Transition"], "Hibernate");

        // Still under way, broken, or nothing was under way: no figure.
        let mut going = before.clone();
        going.power_state = Some(PowerState::WaitingForMachines);
        assert!(power_transition("prod", "ci", &before, &going, t(130)).is_none());
        let mut broken = after.clone();
        broken.broken_at = Some(t(130));
        assert!(power_transition("prod", "ci", &before, &broken, t(130)).is_none());
        assert!(power_transition("prod", "ci", &after, &after, t(130)).is_none());
    }
}
