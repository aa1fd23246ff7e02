//! Simulated machines for tests and demos (`platform: {fake: {...}}`).
//!
//! Stateless: a cluster's machines are derived from the cluster item and the time, so any number of function
//! instances agree on them without sharing memory.
//! - One machine per cluster. It exists `installDuration` after the cluster was created (default 0).
//! - A cluster picked by `installFailureRate` (a stable hash of its id) never gets its machine: the provision call
//!   fails and the cluster is broken (ProvisionStopped), as an install failure would leave it.
//! - A resume completes `resumeDuration` after it began (default 0); a resume picked by `resumeFailureRate`
//!   (a stable hash of the cluster id and the transition's start) never completes, so the pool's
//!   `powerstateTransitionToRunningTimeout` catches it.
//! - A stop completes `stopDuration` after it began (default 0).
//! - Starts and stops act on nothing ([`Machines::actionable`] is always 0): the machine follows the cluster's own
//!   transition, so the power function only looks, never calls.

use apiary_planner::power::{Install, Termination};
use apiary_planner::{Cluster, FakePlatform as Spec, Machine, Platform, PowerState, Timestamp};
use async_trait::async_trait;
use chrono::TimeDelta;

use apiary_ports::platform::{Actuator, Machines, Nodes, Provision, Provisioner, Refused, Target};
use apiary_ports::Result;

/// The simulated platform.
#[derive(Debug, Clone, Copy, Default)]
pub struct FakePlatform;

fn spec<'a>(t: &Target<'a>) -> std::borrow::Cow<'a, Spec> {
    match &t.spec.platform {
        Platform::Fake(f) => std::borrow::Cow::Borrowed(f),
        _ => std::borrow::Cow::Owned(Spec::default()),
    }
}

fn delta(d: &Option<apiary_planner::GoDuration>) -> TimeDelta {
    d.as_ref().and_then(|d| d.get()).unwrap_or_default()
}

/// A stable draw in [0, 1) from `parts` (FNV-1a).
fn draw(parts: &[&str]) -> f64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in parts.iter().flat_map(|p| p.bytes().chain([0])) {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    (h >> 11) as f64 / (1u64 << 53) as f64
}

fn install_fails(spec: &Spec, c: &Cluster) -> bool {
    draw(&[&c.id, "install"]) < spec.install_failure_rate
}

fn resume_hangs(spec: &Spec, c: &Cluster) -> bool {
    let started = c.transition_started_at.map(|t| t.to_rfc3339()).unwrap_or_default();
    draw(&[&c.id, &started, "resume"]) < spec.resume_failure_rate
}

fn since(start: Option<Timestamp>, now: Timestamp) -> TimeDelta {
    start.map_or(TimeDelta::MAX, |s| now - s)
}

/// Whether the machine runs now.
fn running(spec: &Spec, c: &Cluster, now: Timestamp) -> bool {
    match c.power_state {
        None => true,
        Some(PowerState::Running) => true,
        Some(s) if s.is_resuming() => {
            s != PowerState::StartingMachines
                && !resume_hangs(spec, c)
                && since(c.transition_started_at, now) >= delta(&spec.resume_duration)
        }
        // Stopping: the machine runs until the stop has had its time.
        Some(s) if s.is_stopping() && s != PowerState::Hibernating => {
            since(c.transition_started_at, now) < delta(&spec.stop_duration)
        }
        Some(_) => false,
    }
}

fn machines(t: &Target<'_>, ready: bool) -> Machines {
    let s = spec(t);
    let c = t.cluster;
    if c.installed_at.is_none()
        && (install_fails(&s, c) || since(Some(c.created_at), t.now) < delta(&s.install_duration))
    {
        // Not there yet: a failing install never gets its machine, the provision call then fails.
        let total = u32::from(!install_fails(&s, c));
        let not_ready = if total == 1 { vec![format!("{}-0", c.infra_id)] } else { vec![] };
        return Machines { total, not_ready, ..Machines::default() };
    }
    // Simulated machines follow the cluster's own transitions: no start or stop ever acts on them.
    let not_ready = if ready { vec![] } else { vec![format!("{}-0", c.infra_id)] };
    Machines { total: 1, not_ready, ..Machines::default() }
}

#[async_trait]
impl Actuator for FakePlatform {
    async fn machines_running(&self, t: Target<'_>) -> Result<Machines> {
        let up = running(&spec(&t), t.cluster, t.now);
        Ok(machines(&t, up))
    }

    async fn machines_stopped(&self, t: Target<'_>) -> Result<Machines> {
        let up = running(&spec(&t), t.cluster, t.now);
        Ok(machines(&t, !up))
    }

    async fn nodes_ready(&self, t: Target<'_>) -> Result<Nodes> {
        Ok(if running(&spec(&t), t.cluster, t.now) {
            Nodes::Ready
        } else {
            Nodes::NotReady("the simulated nodes are not ready yet".to_owned())
        })
    }

    async fn machine_addresses(&self, t: Target<'_>) -> Result<Vec<Machine>> {
        // The simulated machine's private address, in 10.0.0.0/8, derived from its cluster's infraId.
        let h = t.cluster.infra_id.bytes().fold(0u32, |h, b| h.wrapping_mul(31).wrapping_add(u32::from(b)));
        let [_, a, b, c] = h.to_be_bytes();
        let private_ip = format!("10.{a}.{b}.{}", c.max(1));
        Ok(vec![Machine { id: format!("{}-0", t.cluster.infra_id), private_ip: Some(private_ip), public_ip: None }])
    }

    async fn start_machines(&self, _: Target<'_>) -> Result<Refused> {
        Ok(Refused::default())
    }

    async fn stop_machines(&self, _: Target<'_>) -> Result<Refused> {
        Ok(Refused::default())
    }
}

#[async_trait]
impl Provisioner for FakePlatform {
    async fn install_state(&self, t: Target<'_>) -> Result<Install> {
        Ok(machines(&t, true).install())
    }

    async fn provision(&self, t: Target<'_>) -> Result<Provision> {
        if install_fails(&spec(&t), t.cluster) {
            return Ok(Provision::Refused(format!(
                "simulated install failure of {} (installFailureRate)",
                t.cluster.id
            )));
        }
        Ok(Provision::Accepted { handle: None })
    }

    async fn deprovision(&self, _: Target<'_>) -> Result<Termination> {
        Ok(Termination { remaining: 0, refused: vec![] })
    }
}
