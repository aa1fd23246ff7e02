//! What a pool has observed: its counts and conditions, the rate estimate and learned profile, the schedules'
//! last answer.

use base64::Engine as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::cluster::is_zero_u32;
use super::conditions::Condition;
use super::Timestamp;

/// Spares [`PoolStatus::next_spares`] names: enough for a few claims in a row before the next plan, and a few
/// dozen bytes on the pool item.
pub const NEXT_SPARES: usize = 4;

/// The pool's observed state (`POOL` item status).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PoolStatus {
    /// The poolVersion of the current spec.
    #[serde(default)]
    pub pool_version: String,
    /// The effective size in force (after schedules and the inventory cap).
    #[serde(default)]
    pub size: u32,
    /// The effective running count in force.
    #[serde(default)]
    pub running_count: u32,
    /// Unclaimed, installed, Running: assignable at once.
    #[serde(default)]
    pub ready: u32,
    /// Unclaimed, installed, not Running.
    #[serde(default)]
    pub standby: u32,
    /// Unclaimed, not yet installed.
    #[serde(default)]
    pub installing: u32,
    /// Unclaimed and broken.
    #[serde(default)]
    pub broken: u32,
    /// Unclaimed and made from an older poolVersion.
    #[serde(default)]
    pub stale: u32,
    /// Held by a claim.
    #[serde(default)]
    pub claimed: u32,
    /// Being deprovisioned, or released and waiting to be.
    #[serde(default)]
    pub deleting: u32,
    /// Claims waiting for a cluster.
    #[serde(default)]
    pub pending_claims: u32,
    /// The ids of the oldest Running spares, oldest first (at most [`NEXT_SPARES`]), as the plan left them: the
    /// order seed 000 gives claims. A claim that meets no other takes the first of them still free; the claim API
    /// reads the cluster before it takes it, so a list a moment old costs a read, never a wrong assignment.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub next_spares: Vec<String>,
    /// Deleting clusters whose machines the cloud refuses to terminate.
    #[serde(default, skip_serializing_if = "is_zero_u32")]
    pub deprovision_failing: u32,
    /// Clusters lost to provisioning in a row (reset when one installs): new clusters wait a growing backoff.
    #[serde(default, skip_serializing_if = "is_zero_u32")]
    pub provision_failures: u32,
    /// The last of those.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_provision_failure: Option<ProvisionFailure>,
    /// The claim arrival-rate estimate of the adaptive running count.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub demand: Option<Demand>,
    /// The open schedule window, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_schedule: Option<String>,
    /// The schedules' answer and until when it holds (saves re-reading the cron expressions every plan).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule: Option<ScheduleState>,
    /// How soon the pool's installs, resumes and stops finish when they are quick: the power function looks at a
    /// transition sparsely until then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pace: Option<crate::pace::Pace>,
    /// When the plan that last wrote this status was made (its reconcile read the partition after then), in whole
    /// seconds: what a look found come up before then is old news ([`crate::power::tick::Tick::up`]). Only a
    /// status that changed is written; this alone never makes it change.
    #[serde(default, skip_serializing_if = "Option::is_none", with = "chrono::serde::ts_seconds_option")]
    pub planned_at: Option<crate::model::Timestamp>,
    /// Machines of the pool that no cluster owns, as the reaper last listed them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub orphans: Option<crate::reaper::Orphans>,
    /// AllClustersCurrent and CapacityAvailable.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// The labels that have an entry in the label index claims by selector read ([`crate::select`]); `None` for a
    /// pool whose status a release without the index wrote, which the next plan indexes afresh.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub labels_indexed: Option<crate::select::Labels>,
    /// Fields of a later release, kept as read ([`super::Later`]).
    #[serde(flatten, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub later: super::Later,
}

impl PoolStatus {
    /// The forecast's profile, when the pool learns one.
    pub fn profile(&self) -> Option<&Profile> {
        self.demand.as_ref().and_then(|d| d.profile.as_ref())
    }

    /// The same, to change.
    pub fn profile_mut(&mut self) -> Option<&mut Profile> {
        self.demand.as_mut().and_then(|d| d.profile.as_mut())
    }

    /// The counts in one line, as the status views show them (`make run`, `apiary pool watch`).
    pub fn counts(&self) -> String {
        format!(
            "size {} running {} | ready {} standby {} installing {} claimed {} broken {} stale {} deleting {} pending claims {}",
            self.size,
            self.running_count,
            self.ready,
            self.standby,
            self.installing,
            self.claimed,
            self.broken,
            self.stale,
            self.deleting,
            self.pending_claims
        )
    }

    /// Records what became of a call made with the pool's credentials: `Some(why)` when the cloud refused them
    /// (AuthenticationFailure=True, with why), `None` when a call with them succeeded (False, once it has been
    /// True; a pool never refused carries no such condition). Whether anything changed: the caller writes the
    /// pool only then, so a pool's many clusters do not rewrite it on every call.
    pub fn authenticated(&mut self, refused: Option<&str>, now: Timestamp) -> bool {
        use super::conditions::{condition::AUTHENTICATION_FAILURE, find_condition, reason, set_condition};
        use super::ConditionStatus;
        match refused {
            Some(why) => set_condition(
                &mut self.conditions,
                AUTHENTICATION_FAILURE,
                ConditionStatus::True,
                reason::AUTHENTICATION_FAILED,
                why,
                now,
            ),
            None if find_condition(&self.conditions, AUTHENTICATION_FAILURE)
                .is_some_and(|c| c.status == ConditionStatus::True) =>
            {
                set_condition(
                    &mut self.conditions,
                    AUTHENTICATION_FAILURE,
                    ConditionStatus::False,
                    reason::AUTHENTICATION_SUCCEEDED,
                    "a call with the pool's credentials succeeded",
                    now,
                )
            }
            None => false,
        }
    }
}

/// A cluster lost to provisioning, as the pool remembers it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProvisionFailure {
    /// When its provisioning stopped.
    pub at: Timestamp,
    /// The cluster.
    pub cluster: String,
    /// Why (its ProvisionStopped condition's message).
    pub message: String,
}

/// The arrival-rate estimate kept in the pool's status.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Demand {
    /// Estimated claims per hour at `at`.
    pub claims_per_hour: f64,
    /// When the estimate was last updated.
    pub at: Timestamp,
    /// Claims created up to here are counted in the estimate.
    pub counted_until: Timestamp,
    /// The claims created exactly at `counted_until` that are counted (a parallel burst shares one instant).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub counted_at_edge: Vec<String>,
    /// The forecast's time-of-week profile, when the option is on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<Profile>,
}

/// Buckets in a week.
pub const BUCKETS: usize = 7 * 24 * 6;

/// One value per bucket of the week, in hundredths of a claim; none at all when the pool was read without its
/// profile's own item ([`Profile::kept`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Buckets(pub Vec<u16>);

impl Buckets {
    /// Whether it holds no buckets (read without them).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl Serialize for Buckets {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let bytes: Vec<u8> = self.0.iter().flat_map(|v| v.to_le_bytes()).collect();
        s.serialize_str(&base64::engine::general_purpose::STANDARD_NO_PAD.encode(bytes))
    }
}

impl<'de> Deserialize<'de> for Buckets {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        let bytes = base64::engine::general_purpose::STANDARD_NO_PAD
            .decode(text.as_bytes())
            .map_err(|e| serde::de::Error::custom(format!("forecast buckets: {e}")))?;
        if bytes.len() != BUCKETS * 2 {
            return Err(serde::de::Error::custom(format!(
                "forecast buckets: {} bytes, expected {}",
                bytes.len(),
                BUCKETS * 2
            )));
        }
        Ok(Self(bytes.chunks_exact(2).map(|c| u16::from_le_bytes([c[0], c[1]])).collect()))
    }
}

/// The learned profile, kept in the pool's status with the rate estimate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Profile {
    /// The time zone the buckets are counted in; a different one starts the profile afresh.
    pub time_zone: String,
    /// The start of the first bucket learned.
    pub since: Timestamp,
    /// The start of the bucket being counted.
    pub open: Timestamp,
    /// Claims counted in it.
    pub open_count: u32,
    /// Per bucket, the weighted mean of its claims per week (not yet corrected for the weeks learned).
    #[serde(default, skip_serializing_if = "Buckets::is_empty")]
    pub mean: Buckets,
    /// Per bucket, the weighted mean absolute deviation of its claims from the mean.
    #[serde(default, skip_serializing_if = "Buckets::is_empty")]
    pub spread: Buckets,
    /// Claims per hour a spare must serve at once to be kept, calibrated on the profile when a bucket closes;
    /// none before the first close, or when the profile holds no flow.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worth: Option<f64>,
    /// Where the table keeps `mean` and `spread`: the revision of the pool's own profile item that holds them,
    /// written only when a bucket closes, so the pool item every claim and power run reads stays a kilobyte or
    /// so; `None` for a pool item that holds them itself (as every pool written before the profile item did).
    /// The store reads the buckets back with the pool's partition; a pool read alone has none. The planner keeps
    /// it as it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kept: Option<u64>,
}

impl Profile {
    /// Whether it holds its buckets (a pool read with its whole partition does; one read alone may not).
    pub fn has_buckets(&self) -> bool {
        self.mean.0.len() == BUCKETS && self.spread.0.len() == BUCKETS
    }

    /// Its buckets, `(mean, spread)`, taken out (the profile is left without them).
    pub fn take_buckets(&mut self) -> (Buckets, Buckets) {
        (std::mem::take(&mut self.mean), std::mem::take(&mut self.spread))
    }
}

/// The schedules' answer as of one evaluation, kept in the pool's status.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ScheduleState {
    /// Digest of the schedules it was computed from.
    pub digest: String,
    /// Index of the open window, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active: Option<usize>,
    /// The answer holds until here (a window opens or closes); `None`: forever.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until: Option<Timestamp>,
}

#[cfg(test)]
mod authentication_tests {
    use chrono::{TimeZone, Utc};

    use super::*;
    use crate::model::{condition::AUTHENTICATION_FAILURE, find_condition, ConditionStatus};

    #[test]
    fn a_refusal_is_a_condition_until_a_call_succeeds_and_each_change_is_written_once() {
        let t = |m| Utc.with_ymd_and_hms(2026, 11, 25, 9, m, 0).single().expect("time");
        let mut s = PoolStatus::default();
        assert!(!s.authenticated(None, t(0)), "a pool never refused carries no condition");
        assert!(s.conditions.is_empty());
        let why = "cannot assume role arn:aws:iam::210987654321:role/apiary-member-ci: AccessDenied";
        assert!(s.authenticated(Some(why), t(1)));
        assert!(!s.authenticated(Some(why), t(2)), "the same refusal again writes nothing");
        let c = find_condition(&s.conditions, AUTHENTICATION_FAILURE).expect("condition").clone();
        assert_eq!(
            (c.status, c.reason.as_str(), c.message.as_str()),
            (ConditionStatus::True, "AuthenticationFailed", why)
        );
        assert!(s.authenticated(None, t(3)));
        assert!(!s.authenticated(None, t(4)));
        let c = find_condition(&s.conditions, AUTHENTICATION_FAILURE).expect("condition");
        assert_eq!(
            (c.status, c.reason.as_str(), c.last_transition_time),
            (ConditionStatus::False, "AuthenticationSucceeded", t(3))
        );
    }
}
