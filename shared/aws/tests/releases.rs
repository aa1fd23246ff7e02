//! What each release wrote stays readable (CHANGELOG.md's upgrade policy).
//!
//! `fixtures/releases/<release>/` holds, for every release an update may start from, each kind of item as that
//! release stores it in the table (DynamoDB JSON, as `aws dynamodb scan` prints it) in the states that matter, and
//! each kind of message body it sends. The current release's files are what this code writes now: a change to a
//! stored shape changes them, and fails [`this_release_writes_what_its_fixtures_hold`] until they are written again
//! (`APIARY_WRITE_FIXTURES=1 cargo test -p apiary-aws --test releases`). An older release's files never change:
//! [`every_supported_release_is_read_planned_and_written_back_whole`] reads each of their items as the functions
//! read them, plans each of their pools as from this release's own items, and writes each back without losing a
//! field; [`every_supported_release_s_messages_are_read`] reads each message body. Changing a stored shape without
//! a reader for the old one fails here, not in a deploy.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::PathBuf;

use apiary_aws::dynamo::{read_event, read_item, stored_event, stored_item};
use apiary_planner::events::{Event, EventType};
use apiary_planner::notify::{Delivery, Notice, NoticeKind};
use apiary_planner::{plan, Claim, Cluster, NameLease, Pool, PowerState, Snapshot, Timestamp};
use apiary_ports::messages::NoticeMessage;
use apiary_ports::messages::{PowerMessage, ReconcileMessage};
use apiary_ports::store::{ClaimName, Item, LabelEntry, Notified, ProfileItem};
use aws_sdk_dynamodb::types::AttributeValue;
use serde_json::{json, Value};

/// The releases an update may start from, oldest first; the last is this one.
const SUPPORTED: &[&str] = &["0.1.0", "0.2.0", env!("CARGO_PKG_VERSION")];

/// Attributes an older release wrote that this one no longer keeps, with why dropping them loses nothing. A
/// field is only ever retired here, with its reason, never silently.
const RETIRED: &[(&str, &str, &str)] = &[];

/// The moment every fixture is planned at.
fn now() -> Timestamp {
    "2026-11-28T12:00:00Z".parse().expect("a time")
}

fn dir(release: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/releases").join(release)
}

// ---- DynamoDB JSON ----

fn to_json(attrs: &HashMap<String, AttributeValue>) -> Value {
    let sorted: BTreeMap<&String, Value> = attrs.iter().map(|(k, v)| (k, value(v))).collect();
    json!(sorted)
}

fn value(v: &AttributeValue) -> Value {
    match v {
        AttributeValue::S(s) => json!({ "S": s }),
        AttributeValue::N(n) => json!({ "N": n }),
        AttributeValue::Bool(b) => json!({ "BOOL": b }),
        AttributeValue::Null(b) => json!({ "NULL": b }),
        AttributeValue::M(m) => json!({ "M": to_json(m) }),
        AttributeValue::L(l) => json!({ "L": l.iter().map(value).collect::<Vec<_>>() }),
        AttributeValue::Ss(l) => json!({ "SS": l }),
        AttributeValue::Ns(l) => json!({ "NS": l }),
        other => panic!("an attribute Apiary does not write: {other:?}"),
    }
}

fn from_json(v: &Value) -> HashMap<String, AttributeValue> {
    v.as_object().expect("an item is an object").iter().map(|(k, v)| (k.clone(), attribute(v))).collect()
}

fn attribute(v: &Value) -> AttributeValue {
    let (kind, inner) = v.as_object().and_then(|o| o.iter().next()).expect("one typed value");
    let strings = || inner.as_array().expect("a list").iter().map(|s| s.as_str().expect("text").to_owned()).collect();
    match kind.as_str() {
        "S" => AttributeValue::S(inner.as_str().expect("text").to_owned()),
        "N" => AttributeValue::N(inner.as_str().expect("a number as text").to_owned()),
        "BOOL" => AttributeValue::Bool(inner.as_bool().expect("a boolean")),
        "NULL" => AttributeValue::Null(true),
        "M" => AttributeValue::M(from_json(inner)),
        "L" => AttributeValue::L(inner.as_array().expect("a list").iter().map(attribute).collect()),
        "SS" => AttributeValue::Ss(strings()),
        "NS" => AttributeValue::Ns(strings()),
        other => panic!("an attribute type Apiary does not write: {other}"),
    }
}

// ---- What this release writes ----

/// One pool's items in the states that matter, and the events and messages of its life.
struct Catalog {
    items: Vec<(String, String, Item)>,
    events: Vec<(String, String, Event)>,
    messages: Vec<(String, &'static str, String)>,
}

fn t(s: &str) -> Timestamp {
    s.parse().expect("a time")
}

fn spec(platform: Value) -> Value {
    json!({
        "size": 4, "runningCount": 1, "maxSize": 6, "maxConcurrent": 2,
        "powerstateTransitionToRunningTimeout": "5m", "powerstateTransitionToHibernatingTimeout": "5m",
        "claimLifetime": { "default": "2h", "maximum": "8h" },
        "labels": { "team": "platform" },
        "platform": platform,
    })
}

fn pools() -> Vec<(&'static str, Value)> {
    let secret = |name: &str| format!("arn:aws:secretsmanager:us-east-1:123456789012:secret:{name}-AbCdEf");
    vec![
        (
            "aws",
            spec(json!({ "aws": {
            "region": "us-east-1", "imageId": "ami-0123456789abcdef0", "instanceType": "t3.medium",
            "machineCount": 3, "tags": { "team": "platform" } } })),
        ),
        (
            "member",
            spec(json!({ "aws": {
            "region": "us-east-1", "imageId": "ami-0123456789abcdef0", "instanceType": "t3.medium",
            "machineCount": 3, "roleArn": "arn:aws:iam::210987654321:role/apiary-member" } })),
        ),
        (
            "gcp",
            spec(json!({ "gcp": {
            "project": "apiary-demo", "zones": ["europe-west1-b", "europe-west1-c"],
            "instanceTemplate": "apiary-node", "machineCount": 3, "credentialsSecret": secret("gcp"),
            "labels": { "team": "platform" } } })),
        ),
        (
            "azure",
            spec(json!({ "azure": {
            "subscriptionId": "00000000-0000-0000-0000-00000000a91a", "tenantId": "00000000-0000-0000-0000-0000000000d0",
            "location": "westeurope", "credentialsSecret": secret("azure"),
            "template": { "$schema": "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#",
                          "contentVersion": "1.0.0.0", "resources": [] } } })),
        ),
        (
            "vsphere",
            spec(json!({ "vsphere": {
            "server": "https://vcenter.example.com", "datacenter": "DC1", "template": "rhcos", "folder": "apiary",
            "machineCount": 3, "credentialsSecret": secret("vsphere"), "shutdownGracePeriod": "1m" } })),
        ),
        // A release's own options, absent from the releases before it: planned, not compared with theirs.
        ("installer", {
            let mut s = spec(json!({ "gcp": {
                "project": "apiary-demo", "zone": "europe-west1-b", "instanceTemplate": "apiary-node",
                "machineCount": 3, "credentialsSecret": secret("gcp") } }));
            s["baseDomain"] = json!("ci.example.com");
            s["installTimeout"] = json!("45m");
            s["provisioner"] = json!({ "webhook": { "url": "https://installer.example.com/clusters",
                                                    "secret": secret("webhook") } });
            s["readiness"] = json!({ "kubernetes": { "credentials": "{outputs.kubeconfigSecretArn}",
                                                     "approveNodeCertificates": true }, "settlePause": "2m" });
            s
        }),
        ("inventory", {
            let mut s = spec(json!({ "aws": {
                "region": "us-east-1", "imageId": "ami-0123456789abcdef0", "instanceType": "t3.medium",
                "machineCount": 3 } }));
            s["inventory"] = json!({ "clusterDeployments": [
                { "name": "inv-a", "parameters": { "apiVIP": "10.0.0.10", "ingressVIP": "10.0.0.11" } },
                { "name": "inv-b" }] });
            s["schedules"] = json!([{ "name": "office", "cron": "0 8 * * 1-5", "timeZone": "Europe/Berlin",
                                      "duration": "10h", "runningCount": 2 }]);
            s["adaptiveRunningCount"] = json!({ "instantShare": 0.95, "forecast": {} });
            s["hibernateAfter"] = json!("30m");
            s["access"] = json!({ "claimants": ["arn:aws:iam::123456789012:role/team-a-ci"],
                                  "admins": ["arn:aws:iam::123456789012:user/ann"] });
            s["notify"] = json!([
                { "url": "https://hooks.example.com/apiary",
                  "secret": "arn:aws:secretsmanager:us-east-1:123456789012:secret:hook-AbCdEf" },
                { "url": "https://chat.example.com/apiary",
                  "secret": "arn:aws:secretsmanager:us-east-1:123456789012:secret:chat-AbCdEf",
                  "events": ["claim.expired", "cluster.broken"] }]);
            s
        }),
    ]
}

/// A cluster of `pool` in one state: its id, and the stored fields that state sets.
fn cluster(pool: &str, id: &str, state: Value) -> Cluster {
    let mut c = json!({
        "id": format!("{pool}-{id}"), "clusterName": format!("{pool}-{id}"), "infraId": format!("{pool}-{id}-x7k2p"),
        "createdAt": "2026-11-28T08:00:00Z", "installedAt": "2026-11-28T08:40:00Z",
        "outputs": { "apiUrl": format!("https://api.{pool}-{id}.example.com:6443"),
                     "kubeconfigSecretArn": "arn:aws:secretsmanager:us-east-1:123456789012:secret:kc-AbCdEf" },
        "rev": 7,
    });
    for (k, v) in state.as_object().expect("fields") {
        c[k] = v.clone();
    }
    serde_json::from_value(c).expect("a cluster this release stores")
}

fn clusters(pool: &str) -> Vec<(String, Cluster)> {
    let machines = json!([{ "id": "i-0a1", "privateIp": "10.0.0.11", "publicIp": "3.3.3.11" },
                          { "id": "i-0a2", "privateIp": "10.0.0.12" }]);
    let ready = |s: &str| {
        json!([{ "type": "Ready", "status": s, "reason": "Fixture", "message": "",
                                   "lastTransitionTime": "2026-11-28T11:00:00Z" }])
    };
    let states: Vec<(&str, Value)> = vec![
        ("installing", json!({ "installedAt": null, "outputs": {}, "provisionRef": "op-123" })),
        (
            "running",
            json!({ "specPowerState": "Running", "powerState": "Running", "runningSince": "2026-11-28T11:00:00Z",
                            "machines": machines, "conditions": ready("True"), "lastResumeSeconds": 140 }),
        ),
        (
            "hibernating",
            json!({ "specPowerState": "Hibernating", "powerState": "Hibernating",
                                "lastStopSeconds": 95, "conditions": ready("False") }),
        ),
        (
            "starting",
            json!({ "specPowerState": "Running", "powerState": "StartingMachines",
                             "transitionStartedAt": "2026-11-28T11:58:00Z",
                             "pendingCall": { "call": "Start", "at": "2026-11-28T11:58:00Z" } }),
        ),
        (
            "waiting-nodes",
            json!({ "specPowerState": "Running", "powerState": "WaitingForNodes",
                                  "transitionStartedAt": "2026-11-28T11:57:00Z" }),
        ),
        (
            "stopping",
            json!({ "specPowerState": "Hibernating", "powerState": "Stopping",
                             "transitionStartedAt": "2026-11-28T11:59:00Z" }),
        ),
        (
            "failed-start",
            json!({ "specPowerState": "Running", "powerState": "FailedToStartMachines",
                                 "transitionStartedAt": "2026-11-28T11:50:00Z", "retryAt": "2026-11-28T12:01:00Z" }),
        ),
        (
            "claimed",
            json!({ "specPowerState": "Running", "powerState": "Running", "claim": "job-1",
                            "claimedAt": "2026-11-28T11:30:00Z", "runningSince": "2026-11-28T11:00:00Z" }),
        ),
        (
            "broken",
            json!({ "specPowerState": "Running", "powerState": "WaitingForMachines",
                           "brokenAt": "2026-11-28T11:40:00Z", "transitionStartedAt": "2026-11-28T11:20:00Z" }),
        ),
        ("paused", json!({ "specPowerState": "Hibernating", "powerState": "Hibernating", "powerPaused": true })),
        (
            "deleting",
            json!({ "markedForDeletion": true, "deleting": true, "deletingSince": "2026-11-28T11:55:00Z",
                             "deprovisionFailures": 1 }),
        ),
    ];
    states.into_iter().map(|(label, state)| (label.to_owned(), cluster(pool, label, state))).collect()
}

fn claims() -> Vec<(String, Claim)> {
    let claim = |v: Value| -> Claim { serde_json::from_value(v).expect("a claim this release stores") };
    vec![
        (
            "pending".into(),
            claim(json!({ "name": "job-2", "owner": "arn:aws:iam::123456789012:role/ci",
                                         "createdAt": "2026-11-28T11:59:00Z", "rev": 0 })),
        ),
        (
            "assigned".into(),
            claim(json!({ "name": "job-1", "owner": "arn:aws:iam::123456789012:role/ci",
                                          "subjects": ["arn:aws:iam::123456789012:role/team-*"],
                                          "selector": { "team": "platform" },
                                          "createdAt": "2026-11-28T11:29:00Z", "lifetime": "4h",
                                          "cluster": "CLUSTER", "assignedAt": "2026-11-28T11:30:00Z", "rev": 2 })),
        ),
        (
            "releasing".into(),
            claim(json!({ "name": "job-0", "owner": "arn:aws:iam::123456789012:role/ci",
                                           "createdAt": "2026-11-28T09:00:00Z", "lifetime": "2h",
                                           "releaseRequestedAt": "2026-11-28T11:00:00Z", "rev": 3 })),
        ),
    ]
}

fn catalog() -> Catalog {
    let mut c = Catalog { items: vec![], events: vec![], messages: vec![] };
    for (name, spec) in pools() {
        let pool: Pool = serde_json::from_value(json!({
            "name": name, "spec": spec, "createdAt": "2026-11-28T07:00:00Z", "rev": 12,
        }))
        .expect("a pool this release stores");
        let mut snapshot = Snapshot { pool, clusters: vec![], claims: vec![], leases: vec![] };
        let mut own = clusters(name);
        if name == "installer" {
            // A cluster whose nodes' certificate requests a resume approved: this release's own field.
            let state = json!({ "specPowerState": "Running", "powerState": "WaitingForNodes",
                                "transitionStartedAt": "2026-11-28T11:57:00Z",
                                "nodeCertificates": { "approved": 3, "lastApproved": ["csr-8x2k", "csr-9q7d"],
                                                      "refused": ["csr-zz01"] } });
            own.push(("certificates".into(), cluster(name, "certificates", state)));
        }
        for (label, mut cl) in own {
            if cl.id == "inventory-running" {
                // The holder of inv-a, made from its entry's parameters.
                cl.parameters = [("apiVIP", "10.0.0.10"), ("ingressVIP", "10.0.0.11")]
                    .map(|(k, v)| (k.to_owned(), v.to_owned()))
                    .into();
            }
            snapshot.clusters.push(cl.clone());
            c.items.push((format!("{name} cluster {label}"), name.to_owned(), Item::Cluster(Box::new(cl))));
        }
        let claimed = format!("{name}-claimed");
        for (label, mut cl) in claims() {
            if cl.cluster.as_deref() == Some("CLUSTER") {
                cl.cluster = Some(claimed.clone());
            }
            snapshot.claims.push(cl.clone());
            c.items.push((format!("{name} claim {label}"), name.to_owned(), Item::Claim(Box::new(cl))));
        }
        if name == "inventory" {
            let lease = NameLease {
                name: "inv-a".into(),
                holder: "inventory-running".into(),
                reserved_at: t("2026-11-28T08:00:00Z"),
            };
            c.items.push(("inventory lease".into(), name.to_owned(), Item::Lease(lease)));
        }
        // The pool's status as a plan of this state writes it.
        let planned = plan(&snapshot, now(), 1);
        snapshot.pool.status = planned.status.clone();
        c.items.push((format!("{name} pool"), name.to_owned(), Item::Pool(Box::new(snapshot.pool.clone()))));
        // The pool's entries in the label index, as that status records them.
        for (key, value) in snapshot.pool.status.labels_indexed.iter().flatten() {
            let entry = LabelEntry { pool: name.to_owned(), key: key.clone(), value: value.clone() };
            c.items.push((format!("{name} label {key}"), name.to_owned(), Item::Label(entry)));
        }
    }
    // The name of the claim made by selector (every pool's assigned claim is one in the catalog; the aws pool's
    // holds the name).
    let owner = "arn:aws:iam::123456789012:role/ci".to_owned();
    let entry =
        ClaimName { name: "job-1".into(), holder: "aws".into(), owner, created_at: Some(t("2026-11-28T11:40:00Z")) };
    c.items.push(("claim name".into(), "aws".into(), Item::ClaimName(entry)));
    let through =
        (0..apiary_ports::store::EVENT_SHARDS).map(|i| format!("2026-11-28T11:5{i}:00.000000Z#-/-#1#X")).collect();
    let notified = Notified { pool: "inventory".into(), through, rev: 3 };
    c.items.push(("inventory notified".into(), "inventory".into(), Item::Notified(notified)));
    let tick = apiary_planner::power::tick::Tick {
        rev: 40,
        check: Some(apiary_planner::Recheck { token: 77, due: t("2026-11-28T12:00:15Z") }),
        superseded: Some(apiary_planner::Recheck { token: 76, due: t("2026-11-28T12:00:00Z") }),
        due: BTreeMap::from([
            ("aws-starting".to_owned(), t("2026-11-28T12:00:15Z")),
            ("aws-stopping".to_owned(), t("2026-11-28T12:00:30Z")),
        ]),
        up: Some(t("2026-11-28T11:59:45Z")),
    };
    c.items.push(("aws tick".into(), "aws".into(), Item::Tick(Box::new(tick))));
    let week = |f: fn(usize) -> u16| apiary_planner::Buckets((0..apiary_planner::BUCKETS).map(f).collect());
    let profile = ProfileItem { rev: 12, mean: week(|b| (b % 144) as u16 * 3), spread: week(|b| (b % 7) as u16) };
    c.items.push(("inventory profile".into(), "inventory".into(), Item::Profile(Box::new(profile))));
    for (i, kind) in event_types().into_iter().enumerate() {
        let at = now() - chrono::TimeDelta::seconds(60 - i as i64);
        let mut event = Event::new(kind, at, i as u64 + 1)
            .by("arn:aws:iam::123456789012:role/ci")
            .claim("job-1")
            .cluster("aws-claimed")
            .saying("a fixture");
        // What a notification carries, and a delivery's account of itself.
        let notice = match kind {
            EventType::ClaimAssigned => Some(NoticeKind::ClaimAssigned),
            EventType::ClaimReleased => Some(NoticeKind::ClaimExpired),
            EventType::ClusterBroken | EventType::NotificationDeadLettered => Some(NoticeKind::ClusterBroken),
            _ => None,
        };
        event.notice = notice.map(|kind| {
            Box::new(Notice {
                kind,
                owner: Some("arn:aws:iam::123456789012:role/ci".into()),
                subjects: vec!["arn:aws:iam::123456789012:user/dev".into()],
                outputs: BTreeMap::from([("apiUrl".into(), "https://api.aws-claimed.example.com:6443".into())]),
                cluster_name: Some("aws-claimed".into()),
                expires_at: Some(t("2026-11-28T14:00:00Z")),
            })
        });
        if matches!(
            kind,
            EventType::NotificationDelivered | EventType::NotificationFailed | EventType::NotificationDeadLettered
        ) {
            let of = "2026-11-28T11:59:00.000000Z#job-1/aws-claimed#6#ClaimAssigned".to_owned();
            event.delivery = Some(Delivery { of, hook: 1, attempt: 2 });
        }
        c.events.push((format!("event {}", kind.as_str()), "aws".into(), event));
    }
    let reconcile = |m: &ReconcileMessage| serde_json::to_string(m).expect("json");
    let power = |m: &PowerMessage| serde_json::to_string(m).expect("json");
    c.messages.push(("reconcile".into(), "reconcile", reconcile(&ReconcileMessage::new("aws", "claim"))));
    let mut coalesced = ReconcileMessage::new("aws", "release");
    coalesced.not_before = Some(t("2026-11-28T12:00:01Z"));
    c.messages.push(("reconcile coalesced".into(), "reconcile", reconcile(&coalesced)));
    c.messages.push(("schedule".into(), "reconcile", reconcile(&ReconcileMessage::new("inventory", "schedule"))));
    c.messages.push(("nudge".into(), "power", power(&PowerMessage::nudge("aws", "aws-starting"))));
    c.messages.push(("tick".into(), "power", power(&PowerMessage::tick("aws", Some(77)))));
    c.messages.push(("reap".into(), "power", power(&PowerMessage::reap("aws"))));
    let delivered = c.events.iter().find(|(_, _, e)| e.notice.is_some()).map(|(_, _, e)| e.clone()).expect("one");
    let to = apiary_planner::notify::NotifyHook {
        url: "https://chat.example.com/apiary".into(),
        secret: "arn:aws:secretsmanager:us-east-1:123456789012:secret:chat-AbCdEf".into(),
        events: vec![NoticeKind::ClaimExpired, NoticeKind::ClusterBroken],
    };
    let due = Some(t("2026-11-28T12:05:00Z"));
    let notice = NoticeMessage { event: delivered, hook: 1, to, attempt: 3, due };
    c.messages.push(("notice".into(), "power", power(&PowerMessage::deliver("inventory", notice))));
    c.messages.push(("notices".into(), "power", power(&PowerMessage::notices("inventory"))));
    c.messages.push(("sweep".into(), "sweep", json!({ "source": "apiary-sweep" }).to_string()));
    c
}

/// Every kind of event, each once; a kind added without a fixture does not compile.
fn event_types() -> Vec<EventType> {
    use EventType::*;
    // The kind told after `kind` here (`None` after the last): a chain through every kind.
    let after = |kind: EventType| match kind {
        PoolCreated => Some(PoolChanged),
        PoolChanged => Some(PoolDeletionRequested),
        PoolDeletionRequested => Some(PoolDeleted),
        PoolDeleted => Some(ClaimCreated),
        ClaimCreated => Some(ClaimAssigned),
        ClaimAssigned => Some(ClaimReleaseRequested),
        ClaimReleaseRequested => Some(ClaimChanged),
        ClaimChanged => Some(ClaimReleased),
        ClaimReleased => Some(PowerRequested),
        PowerRequested => Some(ClusterCreated),
        ClusterCreated => Some(InstallFailed),
        InstallFailed => Some(ClusterInstalled),
        ClusterInstalled => Some(PowerTransitionStarted),
        PowerTransitionStarted => Some(NodeCertificatesApproved),
        NodeCertificatesApproved => Some(NodeCertificatesLeftPending),
        NodeCertificatesLeftPending => Some(ClusterRunning),
        ClusterRunning => Some(ClusterHibernated),
        ClusterHibernated => Some(ClusterPaused),
        ClusterPaused => Some(ClusterUnpaused),
        ClusterUnpaused => Some(ClusterBroken),
        ClusterBroken => Some(ClusterDeleting),
        ClusterDeleting => Some(ClusterRemoved),
        ClusterRemoved => Some(NotificationDelivered),
        NotificationDelivered => Some(NotificationFailed),
        NotificationFailed => Some(NotificationDeadLettered),
        NotificationDeadLettered => None,
    };
    std::iter::successors(Some(PoolCreated), |k| after(*k)).collect()
}

/// The power states the fixtures' clusters are in; a state added without a fixture does not compile.
fn covered(state: PowerState) -> bool {
    match state {
        PowerState::Running
        | PowerState::Hibernating
        | PowerState::StartingMachines
        | PowerState::WaitingForNodes
        | PowerState::Stopping
        | PowerState::FailedToStartMachines
        | PowerState::WaitingForMachines => true,
        // Passed through within one look, or Hive's and not Apiary's: stored like the ones above.
        PowerState::FailedToStop
        | PowerState::SyncSetsNotApplied
        | PowerState::WaitingForMachinesToStop
        | PowerState::PausingForClusterOperatorsToSettle
        | PowerState::WaitingForClusterOperators
        | PowerState::Unknown => false,
    }
}

/// The fixtures of a release as the files hold them: items (label, DynamoDB JSON) and messages (label, queue,
/// body).
fn written(c: &Catalog) -> (Value, Value) {
    let mut items = vec![];
    for (label, pool, item) in &c.items {
        items.push(json!({ "label": label, "item": to_json(&stored_item(pool, item).expect("stored")) }));
    }
    for (label, pool, event) in &c.events {
        items.push(json!({ "label": label, "item": to_json(&stored_event(pool, event).expect("stored")) }));
    }
    let messages: Vec<Value> =
        c.messages.iter().map(|(label, queue, body)| json!({ "label": label, "queue": queue, "body": body })).collect();
    (Value::Array(items), Value::Array(messages))
}

fn read(release: &str, file: &str) -> Value {
    let path = dir(release).join(file);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn this_release_writes_what_its_fixtures_hold() {
    let release = env!("CARGO_PKG_VERSION");
    let c = catalog();
    let states: BTreeSet<String> = c
        .items
        .iter()
        .filter_map(|(_, _, i)| match i {
            Item::Cluster(cl) => cl.power_state.filter(|s| covered(*s)).map(|s| format!("{s:?}")),
            _ => None,
        })
        .collect();
    assert_eq!(states.len(), 7, "every power state a cluster is stored in has a fixture: {states:?}");
    let (items, messages) = written(&c);
    if std::env::var_os("APIARY_WRITE_FIXTURES").is_some() {
        std::fs::create_dir_all(dir(release)).expect("the release's directory");
        let pretty = |v: &Value| serde_json::to_string_pretty(v).expect("json") + "\n";
        std::fs::write(dir(release).join("items.json"), pretty(&items)).expect("items written");
        std::fs::write(dir(release).join("messages.json"), pretty(&messages)).expect("messages written");
    }
    assert_eq!(
        read(release, "items.json"),
        items,
        "what this release stores changed: if that is meant, write its fixtures again \
         (APIARY_WRITE_FIXTURES=1 cargo test -p apiary-aws --test releases) and keep every older release readable"
    );
    assert_eq!(read(release, "messages.json"), messages, "the messages this release sends changed");
}

#[test]
fn every_supported_release_is_read_planned_and_written_back_whole() {
    let ours = catalog();
    let mut own_plans = BTreeMap::new();
    for (name, snapshot) in snapshots(ours.items.iter().map(|(_, p, i)| (p.clone(), i.clone()))) {
        own_plans.insert(name, (serde_json::to_value(&snapshot.pool.spec).expect("json"), plan(&snapshot, now(), 1)));
    }
    for release in SUPPORTED {
        let items = read(release, "items.json");
        let mut decoded = vec![];
        for fixture in items.as_array().expect("a list") {
            let label = fixture["label"].as_str().expect("a label");
            let attrs = from_json(&fixture["item"]);
            let pk = match attrs.get("PK") {
                Some(AttributeValue::S(pk)) => pk.clone(),
                _ => panic!("{release} {label}: no partition key"),
            };
            let back = if pk.starts_with("EVENTS#") {
                let event = read_event(attrs.clone())
                    .unwrap_or_else(|e| panic!("{release} {label}: {e}"))
                    .unwrap_or_else(|| panic!("{release} {label}: a kind of event this release does not know"));
                let pool = pk.trim_start_matches("EVENTS#").rsplit_once('#').map(|(p, _)| p.to_owned()).expect("pool");
                stored_event(&pool, &event).expect("written back")
            } else {
                let item = read_item(attrs.clone())
                    .unwrap_or_else(|e| panic!("{release} {label}: {e}"))
                    .unwrap_or_else(|| panic!("{release} {label}: an item of no kind this release reads"));
                let pool = pk.trim_start_matches("POOL#").trim_start_matches("NOTIFIED#").to_owned();
                decoded.push((pool.clone(), item.clone()));
                stored_item(&pool, &item).expect("written back")
            };
            for (name, was) in &attrs {
                if RETIRED.iter().any(|(r, field, _)| r == release && field == name) {
                    continue;
                }
                let now =
                    back.get(name).unwrap_or_else(|| panic!("{release} {label}: {name} is lost when written back"));
                assert_eq!(value(now), value(was), "{release} {label}: {name} changes when written back");
            }
        }
        for (name, snapshot) in snapshots(decoded) {
            let (spec, own) = own_plans.get(&name).unwrap_or_else(|| panic!("{release}: pool {name} is not ours"));
            if *spec != serde_json::to_value(&snapshot.pool.spec).expect("json") {
                // A spec of fields this release no longer writes so: planned, not compared.
                plan(&snapshot, now(), 1);
                continue;
            }
            assert_eq!(&plan(&snapshot, now(), 1), own, "{release}: pool {name} plans as this release's own items");
        }
    }
}

#[test]
fn every_supported_release_s_messages_are_read() {
    for release in SUPPORTED {
        for fixture in read(release, "messages.json").as_array().expect("a list") {
            let (label, body) =
                (fixture["label"].as_str().expect("a label"), fixture["body"].as_str().expect("a body"));
            let sent: Value = serde_json::from_str(body).expect("json");
            let back = match fixture["queue"].as_str() {
                Some("reconcile") => serde_json::to_value(
                    serde_json::from_str::<ReconcileMessage>(body).unwrap_or_else(|e| panic!("{release} {label}: {e}")),
                ),
                Some("power") => serde_json::to_value(
                    serde_json::from_str::<PowerMessage>(body).unwrap_or_else(|e| panic!("{release} {label}: {e}")),
                ),
                Some("sweep") => {
                    assert_eq!(sent["source"], "apiary-sweep", "{release} {label}");
                    continue;
                }
                other => panic!("{release} {label}: a message for {other:?}"),
            }
            .expect("json");
            assert_eq!(back, sent, "{release} {label}: a field is lost when read");
        }
    }
}

/// `items` by pool, as the partition's snapshot (a pool without its pool item is skipped).
fn snapshots(items: impl IntoIterator<Item = (String, Item)>) -> BTreeMap<String, Snapshot> {
    let mut by_pool: BTreeMap<String, Vec<Item>> = BTreeMap::new();
    for (pool, item) in items {
        by_pool.entry(pool).or_default().push(item);
    }
    by_pool
        .into_iter()
        .filter_map(|(pool, items)| apiary_ports::store::partition(items).map(|(snapshot, _)| (pool, snapshot)))
        .collect()
}

/// The update window the other way round: what a later release adds to an item or a message (a field, a kind of
/// event) is read past by this one, not refused, so its functions keep serving while CloudFormation updates the
/// four one after another.
#[test]
fn a_later_release_s_additions_are_read_past() {
    let items = read(env!("CARGO_PKG_VERSION"), "items.json");
    let added = json!({ "S": "a later release's field" });
    for fixture in items.as_array().expect("a list") {
        let label = fixture["label"].as_str().expect("a label");
        let mut item = fixture["item"].clone();
        item["aLaterField"] = added.clone();
        if let Some(spec) = item.get_mut("spec").and_then(|s| s.get_mut("M")) {
            spec["aLaterOption"] = added.clone();
            if let Some(platform) = spec["platform"]["M"].as_object_mut() {
                platform.values_mut().for_each(|v| v["M"]["aLaterSetting"] = added.clone());
            }
        }
        let attrs = from_json(&item);
        if label.starts_with("event ") {
            let mut later = attrs.clone();
            later.insert("type".into(), AttributeValue::S("ClusterTeleported".into()));
            assert!(read_event(later).expect("read").is_none(), "{label}: a later kind of event is left out");
            assert!(read_event(attrs).expect("read").is_some(), "{label}: read with a later field");
        } else {
            assert!(read_item(attrs).unwrap_or_else(|e| panic!("{label}: {e}")).is_some(), "{label}");
        }
    }
    for fixture in read(env!("CARGO_PKG_VERSION"), "messages.json").as_array().expect("a list") {
        let mut body: Value = serde_json::from_str(fixture["body"].as_str().expect("a body")).expect("json");
        body["aLaterField"] = json!(1);
        let label = fixture["label"].as_str().expect("a label");
        match fixture["queue"].as_str() {
            Some("reconcile") => {
                drop(serde_json::from_value::<ReconcileMessage>(body).unwrap_or_else(|e| panic!("{label}: {e}")))
            }
            Some("power") => {
                drop(serde_json::from_value::<PowerMessage>(body).unwrap_or_else(|e| panic!("{label}: {e}")))
            }
            _ => {}
        }
    }
}

/// `attrs` with a later release's field `name` at its top level, and, for a pool, in its spec and its status.
fn with_later_fields(mut attrs: HashMap<String, AttributeValue>) -> HashMap<String, AttributeValue> {
    let later = || AttributeValue::M(HashMap::from([("on".to_owned(), AttributeValue::Bool(true))]));
    attrs.insert("laterField".into(), later());
    for part in ["spec", "status"] {
        if let Some(AttributeValue::M(m)) = attrs.get_mut(part) {
            m.insert("laterField".into(), later());
        }
    }
    attrs
}

/// Whether `attrs` still hold what [`with_later_fields`] added, everywhere it added it.
fn kept_later_fields(attrs: &HashMap<String, AttributeValue>, pool: bool) -> bool {
    let here = |m: &HashMap<String, AttributeValue>| matches!(m.get("laterField"), Some(AttributeValue::M(f)) if f.get("on") == Some(&AttributeValue::Bool(true)));
    let nested = |part: &str| matches!(attrs.get(part), Some(AttributeValue::M(m)) if here(m));
    here(attrs) && (!pool || (nested("spec") && nested("status")))
}

#[test]
fn a_later_release_s_fields_survive_this_release_s_rewrites() {
    // During the next update this release's functions rewrite items the next release wrote: each of this
    // release's pools, clusters and claims, given a field of a release to come, keeps it when written back.
    let mut pools = BTreeMap::new();
    let mut rewritten = 0;
    for (label, pool, item) in catalog().items {
        if !matches!(item, Item::Pool(_) | Item::Cluster(_) | Item::Claim(_)) {
            continue;
        }
        // This release's own item, read back, holds nothing it does not know: not even the table's own keys.
        let own = read_item(stored_item(&pool, &item).expect("stored")).expect("read").expect("an item");
        let unknown = match &own {
            Item::Pool(p) => p.later.len() + p.spec.later.len() + p.status.later.len(),
            Item::Cluster(c) => c.later.len(),
            Item::Claim(c) => c.later.len(),
            _ => 0,
        };
        assert_eq!(unknown, 0, "{label}: {own:?}");
        let attrs = with_later_fields(stored_item(&pool, &item).expect("stored"));
        let read = read_item(attrs).expect("read").expect("an item");
        let back = stored_item(&pool, &read).expect("written back");
        assert!(kept_later_fields(&back, matches!(read, Item::Pool(_))), "{label}: {back:?}");
        if let Item::Pool(p) = read {
            pools.insert(pool, *p);
        }
        rewritten += 1;
    }
    assert!(rewritten > 20 && pools.len() > 3, "{rewritten} items, {} pools", pools.len());
    // The reconcile's write of a status it planned anew, and the claim API's of a changed spec, keep them too.
    for (name, pool) in pools {
        let mut snapshot = Snapshot { pool, clusters: vec![], claims: vec![], leases: vec![] };
        let planned = plan(&snapshot, now(), 1);
        let update = planned.actions.iter().find(|a| matches!(a, apiary_planner::Action::UpdatePool { .. }));
        let Some(update) = update else { continue };
        let writes = apiary_ports::store::writes_for(&mut snapshot, update).expect("writes");
        let Some(apiary_ports::store::Write::Put(written @ Item::Pool(_), _)) = writes.first() else {
            panic!("{name}: {writes:?}")
        };
        assert!(kept_later_fields(&stored_item(&name, written).expect("stored"), true), "{name}: the planned status");
        let mut changed = snapshot.pool.clone();
        changed.spec.size += 1;
        let back = stored_item(&name, &Item::Pool(Box::new(changed))).expect("stored");
        assert!(kept_later_fields(&back, true), "{name}: a changed spec");
    }
}
