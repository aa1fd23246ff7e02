//! Everything a handler needs, built once per process and shared by its invocations.

use std::sync::Arc;

use crate::clock::Clock;
use crate::config::Config;
use crate::metrics::Metrics;
use crate::platform::Platforms;
use crate::queue::Queue;
use crate::schedules::Schedules;
use crate::store::Store;

/// One implementation of each port.
#[derive(Clone)]
pub struct Deps {
    /// Settings.
    pub config: Arc<Config>,
    /// The table.
    pub store: Arc<dyn Store>,
    /// The queues.
    pub queue: Arc<dyn Queue>,
    /// Machines, per platform.
    pub platforms: Arc<Platforms>,
    /// Pool schedules.
    pub schedules: Arc<dyn Schedules>,
    /// Where CloudWatch metrics go.
    pub metrics: Arc<Metrics>,
    /// Time and seeds.
    pub clock: Arc<dyn Clock>,
    /// Secrets Manager, for the claim API's reads of a claimed cluster's credentials (for its owner, its subjects
    /// and its pool's admins), each only if tagged for the claim's pool.
    pub secrets: Arc<dyn crate::secrets::Secrets>,
}
