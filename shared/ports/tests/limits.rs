//! The validation limits keep every item below DynamoDB's 400 KB: the largest pool spec, cluster and claim they
//! allow, measured as DynamoDB counts them.

use std::collections::BTreeMap;

use apiary_planner::validate::limits::*;
use apiary_planner::validate::MAX_CLUSTER_NAME_LEN;
use apiary_planner::*;
use apiary_ports::store::{item_bytes, Item, MAX_ITEM_BYTES};
use chrono::{TimeZone, Utc};

fn t0() -> Timestamp {
    Utc.with_ymd_and_hms(2026, 11, 23, 9, 0, 0).single().expect("time")
}

fn text(n: usize) -> String {
    "x".repeat(n)
}

fn duration() -> GoDuration {
    // The longest valid duration text: 32 characters.
    GoDuration::new("1s".repeat(MAX_DURATION_LEN / 2))
}

fn largest_spec() -> PoolSpec {
    let name = |i: usize| format!("{i:0>width$}", width = MAX_CLUSTER_NAME_LEN).replace('0', "a");
    let mut spec = PoolSpec::new(
        MAX_CLUSTERS,
        Platform::Aws(AwsPlatform {
            region: text(MAX_CLOUD_ID_LEN),
            launch_template: Some(LaunchTemplate { id: text(MAX_CLOUD_ID_LEN), version: Some(text(MAX_CLOUD_ID_LEN)) }),
            image_id: Some(text(MAX_CLOUD_ID_LEN)),
            instance_type: Some(text(MAX_CLOUD_ID_LEN)),
            machine_count: MAX_MACHINES,
            subnet_id: Some(text(MAX_CLOUD_ID_LEN)),
            tags: (0..MAX_TAGS).map(|i| (format!("{i:0>127}"), text(MAX_TAG_VALUE_LEN))).collect(),
        }),
    );
    spec.running_count = MAX_CLUSTERS;
    spec.max_size = Some(MAX_CLUSTERS);
    spec.max_concurrent = Some(MAX_CLUSTERS);
    spec.hibernate_after = Some(duration());
    spec.claim_lifetime = Some(ClaimLifetime { default: Some(duration()), maximum: Some(duration()) });
    spec.powerstate_transition_to_running_timeout = Some(duration());
    spec.powerstate_transition_to_hibernating_timeout = Some(duration());
    spec.install_attempts_limit = Some(MAX_INSTALL_ATTEMPTS);
    spec.install_timeout = Some(duration());
    spec.inventory = Some(Inventory {
        cluster_deployments: (0..MAX_INVENTORY).map(|i| InventoryEntry { name: Some(name(i)) }).collect(),
    });
    spec.base_domain = Some(format!("{}.{}.{}.{}", text(63), text(63), text(63), text(61)));
    spec.labels =
        (0..MAX_LABELS).map(|i| (format!("{i:0>128}"), text(MAX_LABEL_VALUE_LEN))).collect::<BTreeMap<_, _>>();
    spec.schedules = (0..MAX_SCHEDULES)
        .map(|i| Schedule {
            name: Some(format!("s{i:0>62}")),
            cron: format!("{:<64}", "0 8 * * 1-5"),
            time_zone: "America/Argentina/ComodRivadavia".into(),
            duration: duration(),
            size: Some(MAX_CLUSTERS),
            running_count: Some(MAX_CLUSTERS),
        })
        .collect();
    spec.adaptive_running_count = Some(AdaptiveRunningCount {
        instant_share: None,
        wait_p95: Some(duration()),
        window: Some(duration()),
        resume_estimate: Some(duration()),
    });
    spec
}

fn conditions() -> Vec<Condition> {
    let mut c = vec![];
    for t in ["A", "B", "C", "D", "E", "F"] {
        set_condition(&mut c, t, ConditionStatus::True, "SomeReasonWord", &text(100_000), t0());
    }
    c
}

#[test]
fn the_largest_pool_spec_validation_allows_is_far_below_the_item_limit() {
    let spec = largest_spec();
    assert_eq!(validate_spec(&spec).map_err(|e| e.into_iter().take(3).collect::<Vec<_>>()), Ok(()));
    let pool = Pool {
        name: text(63),
        spec,
        status: PoolStatus { conditions: conditions(), ..PoolStatus::default() },
        next_wake_at: Some(t0()),
        deletion_requested_at: Some(t0()),
        created_at: t0(),
        rev: u64::MAX,
    };
    let bytes = item_bytes(&text(63), &Item::Pool(Box::new(pool))).expect("size");
    assert!(bytes < MAX_ITEM_BYTES / 2, "{bytes} bytes");
}

#[test]
fn clusters_and_claims_stay_small_whatever_the_cloud_says() {
    let mut c = Cluster::new(text(63), text(MAX_CLUSTER_NAME_LEN), text(27), t0());
    c.conditions = conditions();
    c.claim = Some(text(63));
    let bytes = item_bytes(&text(63), &Item::Cluster(Box::new(c))).expect("size");
    assert!(bytes < 16 * 1024, "{bytes} bytes: condition messages are cut");
    let mut k = Claim::new(text(63), text(2048), t0());
    k.lifetime = Some(duration());
    k.conditions = conditions();
    let bytes = item_bytes(&text(63), &Item::Claim(Box::new(k))).expect("size");
    assert!(bytes < 16 * 1024, "{bytes} bytes");
}
