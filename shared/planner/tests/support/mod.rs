//! Builders for planner tests: `given(pool().size(4)).with(cluster("a").running())`, and readers for plans.
#![allow(dead_code, missing_docs, clippy::unwrap_used)]

use apiary_planner::*;
use chrono::{TimeDelta, TimeZone, Utc};

/// The start of every test's timeline.
pub fn t0() -> Timestamp {
    Utc.with_ymd_and_hms(2026, 1, 5, 0, 0, 0).single().unwrap()
}

/// `m` minutes after [`t0`].
pub fn at(m: i64) -> Timestamp {
    t0() + TimeDelta::minutes(m)
}

pub fn mins(m: i64) -> TimeDelta {
    TimeDelta::minutes(m)
}

pub struct PoolBuilder {
    pub spec: PoolSpec,
    pub deleting: bool,
}

pub fn pool() -> PoolBuilder {
    PoolBuilder { spec: PoolSpec::new(0, Platform::Fake(FakePlatform::default())), deleting: false }
}

impl PoolBuilder {
    pub fn size(mut self, n: i64) -> Self {
        self.spec.size = n;
        self
    }
    pub fn running_count(mut self, n: i64) -> Self {
        self.spec.running_count = n;
        self
    }
    pub fn max_size(mut self, n: i64) -> Self {
        self.spec.max_size = Some(n);
        self
    }
    pub fn max_concurrent(mut self, n: i64) -> Self {
        self.spec.max_concurrent = Some(n);
        self
    }
    pub fn hibernate_after(mut self, d: &str) -> Self {
        self.spec.hibernate_after = Some(GoDuration::new(d));
        self
    }
    pub fn claim_lifetime(mut self, default: Option<&str>, maximum: Option<&str>) -> Self {
        self.spec.claim_lifetime =
            Some(ClaimLifetime { default: default.map(GoDuration::new), maximum: maximum.map(GoDuration::new) });
        self
    }
    pub fn resume_timeout(mut self, d: &str) -> Self {
        self.spec.powerstate_transition_to_running_timeout = Some(GoDuration::new(d));
        self
    }
    pub fn hibernate_timeout(mut self, d: &str) -> Self {
        self.spec.powerstate_transition_to_hibernating_timeout = Some(GoDuration::new(d));
        self
    }
    pub fn inventory(mut self, names: &[&str]) -> Self {
        self.spec.inventory = Some(Inventory::of(names.iter().copied()));
        self
    }
    /// The inventory entry `name` (already in the inventory) with `parameters`.
    pub fn entry_parameters(mut self, name: &str, parameters: &[(&str, &str)]) -> Self {
        let entries = self.spec.inventory.as_mut().map(|i| &mut i.cluster_deployments);
        if let Some(entry) = entries.into_iter().flatten().find(|e| e.name.as_deref() == Some(name)) {
            entry.parameters = parameters.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
        }
        self
    }
    pub fn schedule(mut self, s: Schedule) -> Self {
        self.spec.schedules.push(s);
        self
    }
    pub fn deleting(mut self) -> Self {
        self.deleting = true;
        self
    }
    /// Adaptive running count serving `share` of claims at once, assuming resumes take `resume`.
    pub fn adaptive(mut self, share: f64, resume: &str) -> Self {
        self.spec.adaptive_running_count = Some(AdaptiveRunningCount {
            instant_share: Some(share),
            wait_p95: None,
            window: None,
            resume_estimate: Some(GoDuration::new(resume)),
            forecast: None,
            keep_fresh: None,
        });
        self
    }
    /// Resume canaries after `after` asleep, `n` at a time, in `hours` (UTC) if given.
    pub fn canaries(mut self, after: &str, n: i64, hours: Option<&str>) -> Self {
        self.spec.resume_canaries = Some(ResumeCanaries {
            after: GoDuration::new(after),
            at_a_time: Some(n),
            hours: hours.map(str::to_string),
            time_zone: None,
        });
        self
    }
    /// Forecast pre-warming on the adaptive option, counting the week in `zone`.
    pub fn forecast(mut self, zone: &str) -> Self {
        if let Some(a) = self.spec.adaptive_running_count.as_mut() {
            a.forecast = Some(Forecast { time_zone: Some(zone.to_string()), half_life_weeks: None });
        }
        self
    }
}

pub struct ClusterBuilder {
    pub c: Cluster,
    pub stale: bool,
    /// A poolVersion of its own (`Some(None)`: none recorded, "unknown").
    pub version: Option<Option<String>>,
}

/// An installed, Hibernating, unclaimed cluster created at [`t0`].
pub fn cluster(id: &str) -> ClusterBuilder {
    let mut c = Cluster::new(id, id, format!("{id}-infra"), t0());
    c.installed_at = Some(t0());
    c.spec_power_state = Some(DesiredPower::Hibernating);
    c.power_state = Some(PowerState::Hibernating);
    ClusterBuilder { c, stale: false, version: None }
}

impl ClusterBuilder {
    pub fn created(mut self, t: Timestamp) -> Self {
        self.c.created_at = t;
        if self.c.installed_at.is_some() {
            self.c.installed_at = Some(t);
        }
        self
    }
    pub fn installing(mut self) -> Self {
        self.c.installed_at = None;
        self.c.power_state = None;
        self
    }
    /// Installed and observed Running, spec Running.
    pub fn running(mut self) -> Self {
        self.c.spec_power_state = Some(DesiredPower::Running);
        self.c.power_state = Some(PowerState::Running);
        self.c.running_since = self.c.installed_at;
        self
    }
    /// Installed and Hibernating, spec Hibernating.
    pub fn hibernating(mut self) -> Self {
        self.c.spec_power_state = Some(DesiredPower::Hibernating);
        self.c.power_state = Some(PowerState::Hibernating);
        self
    }
    /// Spec Running, on the way there.
    pub fn resuming(mut self) -> Self {
        self.c.spec_power_state = Some(DesiredPower::Running);
        self.c.power_state = Some(PowerState::WaitingForMachines);
        self.c.transition_started_at = Some(self.c.created_at);
        self
    }
    pub fn spec(mut self, p: DesiredPower) -> Self {
        self.c.spec_power_state = Some(p);
        self
    }
    /// An admin paused its power management.
    pub fn paused(mut self) -> Self {
        let at = self.c.created_at;
        apiary_planner::power::pause(&mut self.c, at);
        self
    }
    pub fn running_since(mut self, t: Timestamp) -> Self {
        self.c.running_since = Some(t);
        self
    }
    pub fn broken(mut self) -> Self {
        self.c.broken_at = Some(self.c.created_at);
        self
    }
    pub fn provision_stopped(mut self) -> Self {
        self.c.installed_at = None;
        self.c.provision_stopped = true;
        self
    }
    pub fn claimed(mut self, claim: &str, t: Timestamp) -> Self {
        self.c.claim = Some(claim.to_string());
        self.c.claimed_at = Some(t);
        self
    }
    pub fn marked(mut self) -> Self {
        self.c.marked_for_deletion = true;
        self
    }
    pub fn deleting(mut self) -> Self {
        self.c.deleting = true;
        self
    }
    pub fn stale(mut self) -> Self {
        self.stale = true;
        self
    }
    /// Made from poolVersion `v` (`None`: no version recorded).
    pub fn version(mut self, v: Option<&str>) -> Self {
        self.version = Some(v.map(String::from));
        self
    }
    pub fn named(mut self, name: &str) -> Self {
        self.c.cluster_name = name.to_string();
        self
    }
    /// Made from an inventory entry with `parameters`.
    pub fn parameters(mut self, parameters: &[(&str, &str)]) -> Self {
        self.c.parameters = parameters.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
        self
    }
    pub fn rev(mut self, r: u64) -> Self {
        self.c.rev = r;
        self
    }
}

pub fn claim(name: &str) -> ClaimBuilder {
    ClaimBuilder { c: Claim::new(name, "arn:aws:iam::123456789012:user/ci", t0()) }
}

pub struct ClaimBuilder {
    pub c: Claim,
}

impl ClaimBuilder {
    pub fn created(mut self, t: Timestamp) -> Self {
        self.c.created_at = t;
        self
    }
    pub fn assigned(mut self, cluster: &str, t: Timestamp) -> Self {
        self.c.cluster = Some(cluster.to_string());
        self.c.assigned_at = Some(t);
        self
    }
    pub fn lifetime(mut self, d: &str) -> Self {
        self.c.lifetime = Some(GoDuration::new(d));
        self
    }
    pub fn released(mut self, t: Timestamp) -> Self {
        self.c.release_requested_at = Some(t);
        self
    }
}

pub struct Scenario {
    pub pool: PoolBuilder,
    pub clusters: Vec<ClusterBuilder>,
    pub claims: Vec<Claim>,
    pub leases: Vec<NameLease>,
}

/// GIVEN a pool …
pub fn given(pool: PoolBuilder) -> Scenario {
    Scenario { pool, clusters: Vec::new(), claims: Vec::new(), leases: Vec::new() }
}

/// What becomes of each claim once a plan has counted it.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Claims {
    /// It stays in the table (pending, or assigned by the plan).
    Kept,
    /// It leaves the table, as released claims do.
    Released,
}

/// GIVEN a pool, WHEN claims arrive at these minutes (each planned and applied as it comes), THEN the pool as it
/// stands after the last one.
pub fn after_arrivals(p: PoolBuilder, minutes: &[i64], claims: Claims) -> Snapshot {
    let mut snap = given(p).snapshot();
    for (i, m) in minutes.iter().enumerate() {
        snap.claims.push(claim(&format!("k{i:05}")).created(at(*m)).c);
        let plan = plan(&snap, at(*m), i as u64);
        snap = apply(&snap, &plan).unwrap().unwrap();
        if claims == Claims::Released {
            snap.claims.clear();
        }
    }
    snap
}

pub trait Item {
    fn add_to(self, s: &mut Scenario);
}
impl Item for ClusterBuilder {
    fn add_to(self, s: &mut Scenario) {
        s.clusters.push(self);
    }
}
impl Item for ClaimBuilder {
    fn add_to(self, s: &mut Scenario) {
        s.claims.push(self.c);
    }
}
impl Item for NameLease {
    fn add_to(self, s: &mut Scenario) {
        s.leases.push(self);
    }
}

pub fn lease(name: &str, holder: &str, t: Timestamp) -> NameLease {
    NameLease { name: name.to_string(), holder: holder.to_string(), reserved_at: t }
}

impl Scenario {
    /// … with this cluster, claim or lease.
    pub fn with(mut self, item: impl Item) -> Self {
        item.add_to(&mut self);
        self
    }

    pub fn snapshot(&self) -> Snapshot {
        let version = pool_version(&self.pool.spec);
        let clusters = self
            .clusters
            .iter()
            .map(|b| {
                let mut c = b.c.clone();
                c.pool_version = Some(if b.stale { "0000000000000000".to_string() } else { version.clone() });
                if let Some(v) = &b.version {
                    c.pool_version = v.clone();
                }
                c
            })
            .collect();
        Snapshot {
            pool: Pool {
                name: "ci".into(),
                spec: self.pool.spec.clone(),
                status: PoolStatus::default(),
                next_wake_at: None,
                deletion_requested_at: self.pool.deleting.then(t0),
                created_at: t0(),
                rev: 1,
                later: Default::default(),
            },
            clusters,
            claims: self.claims.clone(),
            leases: self.leases.clone(),
        }
    }

    /// WHEN the pool is planned at `now`.
    pub fn plan_at(&self, now: Timestamp) -> Plan {
        plan(&self.snapshot(), now, 42)
    }
}

/// Readers of a plan, for assertions that read as sentences.
pub trait PlanExt {
    fn created(&self) -> Vec<&Cluster>;
    fn deleted(&self) -> Vec<&str>;
    fn deleted_for(&self, reason: DeleteReason) -> Vec<&str>;
    fn assigned(&self) -> Vec<(&str, &str)>;
    fn powered(&self, p: DesiredPower) -> Vec<&str>;
    fn released(&self) -> Vec<(&str, ReleaseReason)>;
    fn reserved(&self) -> Vec<&str>;
    fn released_names(&self) -> Vec<&str>;
}

impl PlanExt for Plan {
    fn created(&self) -> Vec<&Cluster> {
        self.actions
            .iter()
            .filter_map(|a| match a {
                Action::CreateCluster { cluster } => Some(&**cluster),
                _ => None,
            })
            .collect()
    }
    fn deleted(&self) -> Vec<&str> {
        self.actions
            .iter()
            .filter_map(|a| match a {
                Action::DeleteCluster { cluster, .. } => Some(cluster.as_str()),
                _ => None,
            })
            .collect()
    }
    fn deleted_for(&self, why: DeleteReason) -> Vec<&str> {
        self.actions
            .iter()
            .filter_map(|a| match a {
                Action::DeleteCluster { cluster, reason, .. } if *reason == why => Some(cluster.as_str()),
                _ => None,
            })
            .collect()
    }
    fn assigned(&self) -> Vec<(&str, &str)> {
        self.actions
            .iter()
            .filter_map(|a| match a {
                Action::AssignClaim { claim, cluster, .. } => Some((claim.as_str(), cluster.as_str())),
                _ => None,
            })
            .collect()
    }
    /// Clusters whose spec power state the plan sets to `p` (existing ones by SetPowerState, new ones at creation).
    fn powered(&self, p: DesiredPower) -> Vec<&str> {
        self.actions
            .iter()
            .filter_map(|a| match a {
                Action::SetPowerState { cluster, power_state, .. } if *power_state == p => Some(cluster.as_str()),
                Action::CreateCluster { cluster } if cluster.spec_power_state == Some(p) => Some(cluster.id.as_str()),
                _ => None,
            })
            .collect()
    }
    fn released(&self) -> Vec<(&str, ReleaseReason)> {
        self.actions
            .iter()
            .filter_map(|a| match a {
                Action::ReleaseClaim { claim, reason, .. } => Some((claim.as_str(), *reason)),
                _ => None,
            })
            .collect()
    }
    fn reserved(&self) -> Vec<&str> {
        self.actions
            .iter()
            .filter_map(|a| match a {
                Action::ReserveName { name, .. } => Some(name.as_str()),
                _ => None,
            })
            .collect()
    }
    fn released_names(&self) -> Vec<&str> {
        self.actions
            .iter()
            .filter_map(|a| match a {
                Action::ReleaseName { name, .. } => Some(name.as_str()),
                _ => None,
            })
            .collect()
    }
}
