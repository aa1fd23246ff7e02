//! A cloud machine's lifecycle, and which machines a start or a stop acts on: decided here, once, for every
//! platform adapter and for the in-memory cloud.
//!
//! The states are EC2's; the other clouds map theirs onto them. A machine in a transitional state is never
//! acted on: a `stopping` machine cannot be started until it is `stopped`, and a `pending` one cannot be
//! stopped until it is `running`. The power function re-issues its start or stop on every check until the
//! machines settle (as Hive's hibernation controller does), so a machine skipped now is acted on at a later
//! check.

use serde::{Deserialize, Serialize};

/// Where a machine is in its lifecycle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum MachineState {
    /// Starting (after a launch or a start).
    Pending,
    /// Running.
    Running,
    /// Stopping.
    Stopping,
    /// Stopped.
    Stopped,
    /// Being terminated.
    ShuttingDown,
    /// Terminated.
    Terminated,
}

impl MachineState {
    /// EC2's name of the state (`pending`, `shutting-down`, …), or `None` for a name it does not have.
    pub fn from_ec2(name: &str) -> Option<Self> {
        Some(match name {
            "pending" => Self::Pending,
            "running" => Self::Running,
            "stopping" => Self::Stopping,
            "stopped" => Self::Stopped,
            "shutting-down" => Self::ShuttingDown,
            "terminated" => Self::Terminated,
            _ => return None,
        })
    }

    /// EC2's name of the state.
    pub fn ec2_name(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Running => "running",
            Self::Stopping => "stopping",
            Self::Stopped => "stopped",
            Self::ShuttingDown => "shutting-down",
            Self::Terminated => "terminated",
        }
    }

    /// Being terminated or terminated: no longer one of the cluster's machines.
    pub fn is_gone(self) -> bool {
        matches!(self, Self::ShuttingDown | Self::Terminated)
    }

    /// A start acts on stopped machines only; the others are running, on their way, or must first finish
    /// stopping.
    pub fn start_acts(self) -> bool {
        self == Self::Stopped
    }

    /// A stop acts on running machines only; pending ones must first finish starting.
    pub fn stop_acts(self) -> bool {
        self == Self::Running
    }

    /// A termination acts on every machine not already on its way out.
    pub fn terminate_acts(self) -> bool {
        !self.is_gone()
    }
}

#[cfg(test)]
mod tests {
    use super::MachineState::*;
    use super::*;

    #[test]
    fn transitional_machines_are_never_acted_on() {
        let all = [Pending, Running, Stopping, Stopped, ShuttingDown, Terminated];
        let starts: Vec<_> = all.into_iter().filter(|s| s.start_acts()).collect();
        let stops: Vec<_> = all.into_iter().filter(|s| s.stop_acts()).collect();
        let terminates: Vec<_> = all.into_iter().filter(|s| s.terminate_acts()).collect();
        assert_eq!(starts, [Stopped]);
        assert_eq!(stops, [Running]);
        assert_eq!(terminates, [Pending, Running, Stopping, Stopped]);
        for s in all {
            assert_eq!(MachineState::from_ec2(s.ec2_name()), Some(s));
        }
    }
}
