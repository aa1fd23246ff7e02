//! The [`Schedules`] port in memory: each pool's schedules, as last synced.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use apiary_planner::Schedule;
use apiary_ports::schedules::Schedules;
use apiary_ports::Result;
use async_trait::async_trait;

use crate::hook::{enter, leave, Hook, Op};

/// The scheduler.
pub struct MemSchedules {
    hook: Arc<dyn Hook>,
    pools: Mutex<BTreeMap<String, Vec<Schedule>>>,
}

impl MemSchedules {
    /// An empty scheduler whose calls pass through `hook`.
    pub fn new(hook: Arc<dyn Hook>) -> Self {
        Self { hook, pools: Mutex::new(BTreeMap::new()) }
    }

    /// The schedules kept for `pool` (none when it has none).
    pub fn of(&self, pool: &str) -> Vec<Schedule> {
        self.pools.lock().unwrap_or_else(|e| e.into_inner()).get(pool).cloned().unwrap_or_default()
    }
}

#[async_trait]
impl Schedules for MemSchedules {
    async fn sync(&self, pool: &str, schedules: &[Schedule]) -> Result<()> {
        enter(self.hook.as_ref(), Op::Schedules).await?;
        let mut pools = self.pools.lock().unwrap_or_else(|e| e.into_inner());
        if schedules.is_empty() {
            pools.remove(pool);
        } else {
            pools.insert(pool.to_owned(), schedules.to_vec());
        }
        drop(pools);
        leave(self.hook.as_ref(), Op::Schedules, Ok(()))
    }
}
