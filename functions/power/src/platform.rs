//! The platform's answers as the planner takes them: a question ([`Probe`]) or a call ([`ActuatorCall`]) made
//! through the pool's [`Machinery`], its answer as a [`Report`]. An error that trying again cannot mend is a
//! report of failure, so the planner backs off and the cluster's conditions say why.

use apiary_planner::power::certificates::CertificateLook;
use apiary_planner::power::{ActuatorCall, Install, Probe, Readiness, Report};
use apiary_ports::platform::{Machinery, Machines, Nodes, Provision, Refused, Seen, Target};
use apiary_ports::Result;

use crate::credentials::Credentials;

/// What the platform reports for `question`, or what `seen` (a look at many clusters just made) already says.
/// An error that trying again cannot mend (credentials refused, a secret that does not exist, a permission
/// missing) is reported as a failure of what the question is for, so the planner backs off and the cluster's
/// conditions say why, instead of the message failing until it is dropped.
/// A look at the nodes puts what the pool's readiness check did with their certificate requests in `certificates`.
pub(crate) async fn ask(
    platform: &dyn Machinery,
    t: Target<'_>,
    question: Probe,
    creds: &mut Credentials,
    seen: Option<Seen>,
    certificates: &mut CertificateLook,
) -> Result<Report> {
    let answer = match (question, seen) {
        (Probe::Install, Some(Seen { install: Some(install), .. })) => Ok(Report::Install(install)),
        (Probe::MachinesRunning, Some(seen)) => Ok(machines(&seen.running)),
        (Probe::MachinesStopped, Some(seen)) => Ok(stopped(&seen.stopped)),
        (Probe::Install, _) => platform.install_state(t).await.map(Report::Install),
        (Probe::MachinesRunning, _) => platform.machines_running(t).await.map(|m| machines(&m)),
        (Probe::MachinesStopped, _) => platform.machines_stopped(t).await.map(|m| stopped(&m)),
        (Probe::Readiness, _) => platform.cluster_ready(t).await.map(Report::Ready),
        (Probe::NodesReady, _) => platform.nodes_look(t).await.map(|(nodes, looked)| {
            *certificates = looked;
            match nodes {
                Nodes::Ready => Report::Nodes(Readiness::Ready),
                Nodes::NotReady(message) => Report::Nodes(Readiness::NotReady { message }),
                Nodes::Unreachable(message) => Report::Nodes(Readiness::Unreachable { message }),
                // A machine went down while the nodes were awaited: the resume waits for the machines again.
                Nodes::Machines(m) => machines(&m),
            }
        }),
    };
    creds.saw(&answer);
    match answer {
        Err(e) if !e.is_retryable() => {
            let message = e.to_string();
            Ok(match question {
                Probe::Install => Report::Install(Install::Refused { message }),
                _ => Report::CallFailed { message },
            })
        }
        other => other,
    }
}

/// The answer to "are the machines stopped?".
fn stopped(m: &Machines) -> Report {
    match m.unsupported_message() {
        // Nothing is stopped when some machine cannot be: a half-stopped cluster is neither.
        Some(message) if !m.not_ready.is_empty() => Report::Unsupported { message },
        _ => machines(m),
    }
}

fn machines(m: &Machines) -> Report {
    Report::Machines { not_ready: m.not_ready.len() as u32, total: m.total, actionable: m.actionable }
}

/// Makes `call`; the cloud's refusal, and an error that trying again cannot mend, are reports, not errors.
pub(crate) async fn call(
    platform: &dyn Machinery,
    t: Target<'_>,
    call: ActuatorCall,
    creds: &mut Credentials,
) -> Result<Report> {
    let outcome = match call {
        ActuatorCall::Provision => platform.provision(t).await.map(|p| match p {
            Provision::Accepted { handle } => Report::Provisioned { handle },
            Provision::Refused(message) => Report::CallFailed { message },
        }),
        ActuatorCall::Start => platform.start_machines(t).await.map(refusal),
        ActuatorCall::Stop => platform.stop_machines(t).await.map(refusal),
    };
    creds.saw(&outcome);
    match outcome {
        Err(e) if !e.is_retryable() => Ok(Report::CallFailed { message: e.to_string() }),
        other => other,
    }
}

fn refusal(refused: Refused) -> Report {
    match refused.into_result() {
        Ok(()) => Report::CallAccepted,
        Err(message) => Report::CallFailed { message },
    }
}
