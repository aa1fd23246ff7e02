//! The validation limits keep every item below DynamoDB's 400 KB: the largest pool spec, cluster and claim they
//! allow, measured as DynamoDB counts them.

use std::collections::BTreeMap;

use apiary_planner::forecast::{Buckets, Profile, BUCKETS};
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
            role_arn: Some(format!(
                "arn:aws:iam::123456789012:role/{}/{}",
                "p".repeat(MAX_ROLE_ARN_LEN - 96),
                "r".repeat(64)
            )),
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
    // Every entry's parameters together as large as the inventory allows, in entries of the most parameters.
    let per_entry = MAX_LABEL_KEY_LEN + MAX_LABEL_VALUE_LEN;
    let mut budget = MAX_INVENTORY_PARAMETER_BYTES;
    let parameters = |budget: &mut usize| {
        let mut p = BTreeMap::new();
        while p.len() < MAX_ENTRY_PARAMETERS && *budget >= per_entry {
            p.insert(format!("{:0>width$}", p.len(), width = MAX_LABEL_KEY_LEN), text(MAX_LABEL_VALUE_LEN));
            *budget -= per_entry;
        }
        p
    };
    spec.inventory = Some(Inventory {
        cluster_deployments: (0..MAX_INVENTORY)
            .map(|i| InventoryEntry { name: Some(name(i)), parameters: parameters(&mut budget) })
            .collect(),
    });
    let hook = |i: usize| apiary_planner::notify::NotifyHook {
        url: format!("https://hooks.example.com/{i}{}", text(MAX_URL_LEN - 27)),
        secret: format!("arn:aws:secretsmanager:eu-west-1:123456789012:secret:{i}{}", text(MAX_SECRET_ARN_LEN - 55)),
        events: apiary_planner::notify::NoticeKind::ALL.to_vec(),
    };
    spec.notify = (0..apiary_planner::notify::MAX_HOOKS).map(hook).collect();
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
        forecast: Some(Forecast { time_zone: Some(LONGEST_ZONE.into()), half_life_weeks: Some(8.0) }),
        keep_fresh: Some(true),
    });
    let principal = |i: usize| {
        let arn = format!("arn:aws:iam::111111111111:role/r{i:02}-");
        format!("{arn}{}", text(MAX_PRINCIPAL_LEN - arn.len()))
    };
    spec.access = Some(PoolAccess {
        claimants: (0..MAX_PRINCIPALS).map(principal).collect(),
        admins: (0..MAX_PRINCIPALS).map(principal).collect(),
    });
    spec.resume_canaries = Some(ResumeCanaries {
        after: duration(),
        at_a_time: Some(100),
        hours: Some("22:00-06:00".into()),
        time_zone: Some(LONGEST_ZONE.into()),
    });
    spec
}

/// The largest spec of each platform: the largest AWS spec with its platform swapped.
fn largest_of_each_platform() -> Vec<PoolSpec> {
    let arn = |n: usize| format!("arn:aws:secretsmanager:eu-west-1:123456789012:secret:{}", text(n));
    let secret = arn(MAX_SECRET_ARN_LEN - arn(0).len());
    let gcp = GcpPlatform {
        project: format!("p{}", text(29)),
        zone: Some(text(63)),
        zones: (0..MAX_ZONES).map(|i| format!("z{i:0>62}")).collect(),
        instance_template: format!("projects/{}/regions/{}/instanceTemplates/{}", text(30), text(63), text(63)),
        machine_count: MAX_MACHINES,
        credentials_secret: secret.clone(),
        labels: (0..MAX_GCP_LABELS).map(|i| (format!("k{i:0>62}"), text(MAX_GCP_NAME_LEN))).collect(),
    };
    // An inline template padded to the limit with the parameters.
    let pad = MAX_AZURE_TEMPLATE_BYTES - 100 - MAX_AZURE_PARAMETERS * 136;
    let azure = AzurePlatform {
        subscription_id: "00000000-0000-0000-0000-000000000000".into(),
        tenant_id: "00000000-0000-0000-0000-000000000000".into(),
        location: text(MAX_AZURE_LOCATION_LEN),
        resource_group_name: format!("{}{{infraId}}", text(MAX_RESOURCE_GROUP_LEN - MAX_INFRA_ID_LEN)),
        template: Some(serde_json::json!({
            "parameters": {"infraId": {"type": "string"}},
            "resources": [],
            "metadata": {"pad": text(pad)},
        })),
        template_uri: None,
        parameters: (0..MAX_AZURE_PARAMETERS).map(|i| (format!("p{i:0>127}"), serde_json::json!("v"))).collect(),
        credentials_secret: secret.clone(),
        tags: (0..MAX_AZURE_TAGS).map(|i| (format!("{i:0>128}"), text(MAX_AZURE_TAG_VALUE_LEN))).collect(),
    };
    let vsphere = VspherePlatform {
        server: format!("{}.{}.{}.{}", text(63), text(63), text(63), text(61)),
        datacenter: text(MAX_VSPHERE_NAME_LEN),
        template: text(MAX_VSPHERE_NAME_LEN),
        folder: text(MAX_VSPHERE_NAME_LEN),
        resource_pool: Some(text(MAX_VSPHERE_NAME_LEN)),
        datastore: Some(text(MAX_VSPHERE_NAME_LEN)),
        machine_count: MAX_MACHINES,
        credentials_secret: secret,
        ca_bundle: Some(format!(
            "-----BEGIN CERTIFICATE-----{}-----END CERTIFICATE-----",
            text(MAX_CA_BUNDLE_LEN - 52)
        )),
        shutdown_grace_period: Some(duration()),
    };
    let aws = largest_spec();
    [Platform::Gcp(gcp), Platform::Vsphere(vsphere), Platform::Azure(azure)]
        .into_iter()
        .map(|platform| PoolSpec { platform, ..aws.clone() })
        .chain([aws.clone()])
        .collect()
}

/// The longest time zone name there is.
const LONGEST_ZONE: &str = "America/Argentina/ComodRivadavia";

/// A rate estimate with a profile learned to the brim.
fn full_profile() -> Demand {
    let full = || Buckets(vec![u16::MAX; BUCKETS]);
    Demand {
        claims_per_hour: f64::MAX,
        at: t0(),
        counted_until: t0(),
        counted_at_edge: vec![text(63)],
        profile: Some(Profile {
            time_zone: LONGEST_ZONE.into(),
            since: t0(),
            open: t0(),
            open_count: u32::MAX,
            mean: full(),
            spread: full(),
            worth: Some(f64::MAX),
            kept: None,
        }),
    }
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
    for spec in largest_of_each_platform() {
        let kind = spec.platform.kind();
        assert_eq!(validate_spec(&spec).map_err(|e| e.into_iter().take(3).collect::<Vec<_>>()), Ok(()), "{kind}");
        let pool = Pool {
            name: text(63),
            spec,
            status: PoolStatus { conditions: conditions(), demand: Some(full_profile()), ..PoolStatus::default() },
            next_wake_at: Some(t0()),
            deletion_requested_at: Some(t0()),
            created_at: t0(),
            rev: u64::MAX,
            later: Default::default(),
        };
        let bytes = item_bytes(&text(63), &Item::Pool(Box::new(pool))).expect("size");
        // At most 60% of the limit (the largest, Azure's, is about 232 KB with every access list, notify hook and
        // inventory parameter full): 160 KB stay free for the fields to come.
        assert!(bytes < MAX_ITEM_BYTES * 60 / 100, "{kind}: {bytes} bytes");
    }
}

#[test]
fn clusters_and_claims_stay_small_whatever_the_cloud_says() {
    let mut c = Cluster::new(text(63), text(MAX_CLUSTER_NAME_LEN), text(MAX_INFRA_ID_LEN), t0());
    c.conditions = conditions();
    c.provision_ref = Some(text(MAX_PROVISION_REF_LEN));
    c.claim = Some(text(63));
    let bytes = item_bytes(&text(63), &Item::Cluster(Box::new(c))).expect("size");
    assert!(bytes < 24 * 1024, "{bytes} bytes: condition messages are cut, handles bounded");
    let mut k = Claim::new(text(63), text(2048), t0());
    k.lifetime = Some(duration());
    k.conditions = conditions();
    let bytes = item_bytes(&text(63), &Item::Claim(Box::new(k))).expect("size");
    assert!(bytes < 16 * 1024, "{bytes} bytes");
}
