//! Pools and clusters for tests, in the shapes the functions store them.

use apiary_planner::{AwsPlatform, Cluster, DesiredPower, Platform, Pool, PoolSpec, PowerState, Timestamp};
use apiary_ports::store::Item;

use crate::World;

/// A pool spec on the `aws` platform: `size` clusters of two machines, `running` kept Running.
pub fn aws_spec(size: i64, running: i64) -> PoolSpec {
    let mut spec = PoolSpec::new(
        size,
        Platform::Aws(AwsPlatform {
            region: "us-east-1".into(),
            launch_template: None,
            image_id: Some("ami-0123456789abcdef0".into()),
            instance_type: Some("t3.large".into()),
            machine_count: 2,
            subnet_id: None,
            tags: Default::default(),
            role_arn: None,
        }),
    );
    spec.running_count = running;
    spec
}

/// A new pool item (rev 0, no status yet) created at `now`.
pub fn pool(name: &str, spec: PoolSpec, now: Timestamp) -> Pool {
    Pool::new(name, spec, now)
}

/// An installed cluster created and installed at `at`, in power state `power` (spec and status alike).
pub fn installed(id: &str, power: DesiredPower, at: Timestamp) -> Cluster {
    let mut c = Cluster::new(id, id, format!("{id}-infra"), at);
    c.installed_at = Some(at);
    c.spec_power_state = Some(power);
    c.power_state = Some(match power {
        DesiredPower::Running => PowerState::Running,
        DesiredPower::Hibernating => PowerState::Hibernating,
    });
    c.running_since = (power == DesiredPower::Running).then_some(at);
    c
}

impl World {
    /// Stores a pool item as is (test setup, no hook).
    pub fn put_pool(&self, pool: Pool) {
        let name = pool.name.clone();
        self.store.put(&name, Item::Pool(Box::new(pool)));
    }

    /// Stores a cluster item as is (test setup, no hook).
    pub fn put_cluster(&self, pool: &str, cluster: Cluster) {
        self.store.put(pool, Item::Cluster(Box::new(cluster)));
    }

    /// The stored snapshot of `pool`, if it exists.
    pub fn snapshot(&self, pool: &str) -> Option<apiary_planner::Snapshot> {
        self.store.tables().snapshot(pool)
    }

    /// The stored cluster `id` of `pool`.
    pub fn cluster(&self, pool: &str, id: &str) -> Option<Cluster> {
        self.snapshot(pool)?.clusters.into_iter().find(|c| c.id == id)
    }

    /// Plans `pool` once at the world's time and writes the plan as the reconcile function does (its transactions
    /// in order, each conditional, with their events), sending no messages: the pool's status, its label index and
    /// its claims as its reconcile leaves them. Test setup; the store's hook sees every call.
    pub async fn planned(&self, pool: &str) -> apiary_planner::Plan {
        use apiary_ports::store::{transactions, writes_with_events, Store};
        let now = self.now();
        let mut snapshot = self.store.read_pool(pool).await.expect("read").expect("the pool exists");
        let plan = apiary_planner::plan(&snapshot, now, 7);
        for group in transactions(&plan.actions) {
            let mut writes = Vec::new();
            for action in group {
                writes.extend(writes_with_events(&mut snapshot, action, now).expect("the plan applies"));
            }
            self.store.write(pool, writes).await.expect("the plan's writes hold");
        }
        plan
    }
}
