//! The Compute Engine adapter against the fake Compute API: selection by label, pagination, start and stop
//! re-issued until settled, refusals isolated, throttling retried, token renewal, provisioning retried without
//! doubling, deprovisioning until empty.

use std::time::Duration;

use crate::support::{refused_to_intruder, MemSecrets, ARN};
use apiary_clouds::gcp::{cluster_label, Gcp};
use apiary_clouds::http::Http;
use apiary_fakeclouds::gcp::{FakeGcp, Timings};
use apiary_planner::{Cluster, GcpPlatform, Platform, PoolSpec};
use apiary_ports::platform::{Actuator, Nodes, Provision, Provisioner, Target};

const PROJECT: &str = "ci-clusters-1";

struct World {
    fake: FakeGcp,
    gcp: Gcp,
    spec: PoolSpec,
    cluster: Cluster,
}

impl World {
    async fn new(machines: i64, zones: &[&str]) -> Self {
        let fake = FakeGcp::start(Timings { boot: Duration::from_secs(60), stop: Duration::from_secs(30) })
            .await
            .expect("fake");
        fake.add_template("apiary-node");
        let key = fake.service_account("apiary@ci-clusters-1.iam.gserviceaccount.com", PROJECT);
        let secrets = MemSecrets::one(key);
        let http = Http::new(None).expect("client").with_budget(Duration::from_secs(5));
        let gcp = Gcp::new(http, secrets, Some(fake.endpoint()));
        let platform = GcpPlatform {
            project: PROJECT.into(),
            zone: None,
            zones: zones.iter().map(|z| (*z).to_owned()).collect(),
            instance_template: "apiary-node".into(),
            machine_count: machines,
            credentials_secret: ARN.into(),
            labels: [("team".to_owned(), "ci".to_owned())].into_iter().collect(),
        };
        let now = chrono::DateTime::from_timestamp(1_800_000_000, 0).expect("time");
        let cluster = Cluster::new("ci-abcde", "ci", "ci-x7k2p", now);
        Self { fake, gcp, spec: PoolSpec::new(1, Platform::Gcp(platform)), cluster }
    }

    fn target(&self) -> Target<'_> {
        Target { pool: "gcp-ci", spec: &self.spec, cluster: &self.cluster, now: self.cluster.created_at }
    }

    async fn provisioned(&self) {
        assert_eq!(self.gcp.provision(self.target()).await.expect("call"), Provision::Accepted { handle: None });
    }

    fn statuses(&self) -> Vec<String> {
        self.fake.instances(PROJECT).into_iter().map(|(_, _, s)| s).collect()
    }
}

#[tokio::test]
async fn provision_creates_labelled_instances_and_a_retry_does_not_double_them() {
    let w = World::new(3, &["europe-west1-b", "europe-west1-c"]).await;
    assert_eq!(w.gcp.provision(w.target()).await.expect("call"), Provision::Accepted { handle: None });
    let instances = w.fake.instances(PROJECT);
    let names: Vec<(String, String)> = instances.iter().map(|(z, n, _)| (z.clone(), n.clone())).collect();
    assert_eq!(
        names,
        [
            ("europe-west1-b".to_owned(), "ci-x7k2p-0".to_owned()),
            ("europe-west1-b".to_owned(), "ci-x7k2p-2".to_owned()),
            ("europe-west1-c".to_owned(), "ci-x7k2p-1".to_owned()),
        ]
    );
    let labels = w.fake.labels(PROJECT, "europe-west1-b", "ci-x7k2p-0");
    assert_eq!(labels.get(&cluster_label("ci-x7k2p")).map(String::as_str), Some("owned"));
    assert_eq!(labels.get("apiary-pool").map(String::as_str), Some("gcp-ci"));
    assert_eq!(labels.get("apiary-cluster").map(String::as_str), Some("ci-abcde"));
    assert_eq!(labels.get("team").map(String::as_str), Some("ci"));

    // The same cluster again (a retry after a lost answer): the same requestIds, nothing new.
    let first: Vec<String> = w.fake.take_log().into_iter().filter(|l| l.contains("bulkInsert")).collect();
    assert_eq!(w.gcp.provision(w.target()).await.expect("call"), Provision::Accepted { handle: None });
    let again: Vec<String> = w.fake.take_log().into_iter().filter(|l| l.contains("bulkInsert")).collect();
    assert_eq!(first, again, "a retry sends the same requestIds");
    assert_eq!(w.fake.instances(PROJECT).len(), 3);
}

#[tokio::test]
async fn a_missing_template_or_an_exhausted_quota_is_a_refusal_naming_it() {
    let mut w = World::new(1, &["europe-west1-b"]).await;
    if let Platform::Gcp(g) = &mut w.spec.platform {
        g.instance_template = "projects/ci-clusters-1/global/instanceTemplates/gone".into();
    }
    let Provision::Refused(refused) = w.gcp.provision(w.target()).await.expect("call") else { panic!("no template") };
    assert!(refused.contains("instanceTemplates/gone") && refused.contains("404"), "{refused}");

    let w = World::new(1, &["europe-west1-b"]).await;
    w.fake.exhaust_quota(true);
    let Provision::Refused(refused) = w.gcp.provision(w.target()).await.expect("call") else { panic!("no quota") };
    assert!(refused.contains("QUOTA_EXCEEDED"), "{refused}");
}

#[tokio::test]
async fn machines_are_selected_by_label_across_pages() {
    let w = World::new(5, &["europe-west1-b"]).await;
    w.fake.set_page_size(2);
    let owned = [(cluster_label("ci-x7k2p").leak() as &str, "owned")];
    for n in 0..5 {
        w.fake.add_instance(PROJECT, "europe-west1-b", &format!("ci-x7k2p-{n}"), "RUNNING", &owned);
    }
    // Another cluster's instance and an unlabelled one with the same prefix are not this cluster's.
    w.fake.add_instance(PROJECT, "europe-west1-b", "other-1", "RUNNING", &[(&cluster_label("other"), "owned")]);
    w.fake.add_instance(PROJECT, "europe-west1-b", "ci-x7k2p-extra", "RUNNING", &[]);
    let m = w.gcp.machines_running(w.target()).await.expect("list");
    assert_eq!((m.total, m.not_ready.len()), (5, 0));
    let pages = w.fake.take_log().iter().filter(|l| l.contains("aggregated/instances")).count();
    assert_eq!(pages, 3, "five instances in pages of two");
}

#[tokio::test]
async fn start_and_stop_are_reissued_until_the_machines_settle() {
    let w = World::new(2, &["europe-west1-b"]).await;
    w.provisioned().await;
    let m = w.gcp.machines_running(w.target()).await.expect("list");
    assert_eq!((m.total, m.not_ready.len(), m.actionable), (2, 2, 0), "booting: nothing a start acts on");
    w.fake.advance(Duration::from_secs(61));
    assert_eq!(w.gcp.nodes_ready(w.target()).await.expect("ready"), Nodes::Ready);

    // Stop, and a second stop while STOPPING: no refusal, nothing doubled.
    assert!(w.gcp.stop_machines(w.target()).await.expect("stop").machines.is_empty());
    assert_eq!(w.statuses(), ["STOPPING", "STOPPING"]);
    assert!(w.gcp.stop_machines(w.target()).await.expect("stop again").machines.is_empty());
    // A start while stopping is not acted on (the API would answer resourceNotReady); the machines are not
    // stopped yet, so the power function re-issues it at its next check.
    assert!(w.gcp.start_machines(w.target()).await.expect("start").machines.is_empty());
    let m = w.gcp.machines_stopped(w.target()).await.expect("list");
    assert_eq!(m.not_ready.len(), 2);
    w.fake.advance(Duration::from_secs(31));
    assert_eq!(w.statuses(), ["TERMINATED", "TERMINATED"]);
    assert!(w.gcp.machines_stopped(w.target()).await.expect("list").not_ready.is_empty());
    assert!(w.gcp.start_machines(w.target()).await.expect("start").machines.is_empty());
    assert_eq!(w.statuses(), ["STAGING", "STAGING"]);
    // A start of booting machines sends nothing: they are not in a state a start acts on.
    w.fake.take_log();
    assert!(w.gcp.start_machines(w.target()).await.expect("start again").machines.is_empty());
    assert!(w.fake.take_log().iter().all(|l| !l.ends_with("/start")));
    w.fake.advance(Duration::from_secs(61));
    assert!(w.gcp.machines_running(w.target()).await.expect("list").not_ready.is_empty());
}

#[tokio::test]
async fn a_suspended_machine_is_resumed() {
    let w = World::new(1, &["europe-west1-b"]).await;
    w.fake.add_instance(PROJECT, "europe-west1-b", "ci-x7k2p-0", "SUSPENDED", &[(&cluster_label("ci-x7k2p"), "owned")]);
    assert!(w.gcp.start_machines(w.target()).await.expect("start").machines.is_empty());
    assert!(w.fake.take_log().iter().any(|l| l.ends_with("/instances/ci-x7k2p-0/resume")));
    assert_eq!(w.statuses(), ["STAGING"]);
}

#[tokio::test]
async fn one_refusing_machine_does_not_block_the_others() {
    let w = World::new(3, &["europe-west1-b"]).await;
    w.provisioned().await;
    w.fake.advance(Duration::from_secs(61));
    w.fake.refuse("ci-x7k2p-1");
    let refused = w.gcp.stop_machines(w.target()).await.expect("stop");
    assert_eq!(refused.machines.len(), 1);
    assert_eq!(refused.machines[0].0, "ci-x7k2p-1");
    assert!(refused.machines[0].1.contains("403"), "{:?}", refused.machines);
    assert_eq!(w.statuses(), ["STOPPING", "RUNNING", "STOPPING"]);
}

#[tokio::test]
async fn throttling_and_unavailability_are_retried_within_the_budget() {
    let w = World::new(1, &["europe-west1-b"]).await;
    w.provisioned().await;
    w.fake.throttle(2);
    w.fake.unavailable(1);
    let m = w.gcp.machines_running(w.target()).await.expect("retried");
    assert_eq!(m.total, 1);

    // Past the budget: a retryable error, so the message comes back later.
    w.fake.unavailable(1000);
    let err = w.gcp.machines_running(w.target()).await.expect_err("budget spent");
    assert!(err.is_retryable(), "{err}");
    assert!(err.to_string().contains("503"), "{err}");
}

#[tokio::test]
async fn an_expired_token_is_renewed_once() {
    let w = World::new(1, &["europe-west1-b"]).await;
    w.provisioned().await;
    let tokens = w.fake.take_log().iter().filter(|l| l.as_str() == "POST /token").count();
    assert_eq!(tokens, 1, "one token for every call while it is valid");
    w.fake.expire_tokens();
    assert_eq!(w.gcp.machines_running(w.target()).await.expect("renewed").total, 1);
    let log = w.fake.take_log();
    assert_eq!(log.iter().filter(|l| l.as_str() == "POST /token").count(), 1, "{log:?}");
}

#[tokio::test]
async fn a_wrong_key_is_refused_by_the_token_endpoint_without_showing_the_key() {
    let w = World::new(1, &["europe-west1-b"]).await;
    let stranger = FakeGcp::start(Timings::default()).await.expect("fake");
    // A key the fake never issued: signed by a key it does not know.
    let key = stranger.service_account("apiary@ci-clusters-1.iam.gserviceaccount.com", PROJECT);
    let key = key.replace(&stranger.token_uri(), &w.fake.token_uri());
    let secrets = MemSecrets::one(key.clone());
    let gcp = Gcp::new(Http::new(None).expect("client"), secrets, Some(w.fake.endpoint()));
    let err = gcp.machines_running(w.target()).await.expect_err("refused");
    let text = err.to_string();
    assert!(text.contains("invalid_grant"), "{text}");
    assert!(!text.contains("PRIVATE KEY"), "{text}");

    let secrets = MemSecrets::one("{\"client_email\": 424242}".to_owned());
    let gcp = Gcp::new(Http::new(None).expect("client"), secrets, Some(w.fake.endpoint()));
    let err = gcp.machines_running(w.target()).await.expect_err("not a key").to_string();
    assert!(err.contains(ARN) && err.contains("wrong type") && !err.contains("424242"), "{err}");
}

#[tokio::test]
async fn an_unreachable_zone_is_no_conclusion() {
    let w = World::new(1, &["europe-west1-b"]).await;
    w.provisioned().await;
    w.fake.unreachable("europe-west1-b");
    let err = w.gcp.machines_stopped(w.target()).await.expect_err("unreachable");
    assert!(err.is_retryable() && err.to_string().contains("europe-west1-b"), "{err}");
}

#[tokio::test]
async fn deprovision_deletes_until_nothing_is_left() {
    let w = World::new(2, &["europe-west1-b"]).await;
    w.provisioned().await;
    w.fake.advance(Duration::from_secs(61));
    let t = w.gcp.deprovision(w.target()).await.expect("delete");
    assert_eq!((t.remaining, t.refused.len()), (2, 0), "being deleted, still listed");
    let t = w.gcp.deprovision(w.target()).await.expect("delete again");
    assert_eq!((t.remaining, t.refused.len()), (2, 0));
    w.fake.advance(Duration::from_secs(31));
    let t = w.gcp.deprovision(w.target()).await.expect("done");
    assert_eq!((t.remaining, t.refused.len()), (0, 0));
    assert!(w.fake.instances(PROJECT).is_empty());
}

#[tokio::test]
async fn a_refused_deletion_is_reported_and_the_rest_deleted() {
    let w = World::new(2, &["europe-west1-b"]).await;
    w.provisioned().await;
    w.fake.refuse("ci-x7k2p-0");
    let t = w.gcp.deprovision(w.target()).await.expect("delete");
    assert_eq!(t.refused.len(), 1);
    assert_eq!(t.refused[0].0, "ci-x7k2p-0");
    w.fake.advance(Duration::from_secs(31));
    let t = w.gcp.deprovision(w.target()).await.expect("delete");
    assert_eq!((t.remaining, t.refused.len()), (1, 1));
    w.fake.comply("ci-x7k2p-0");
    w.gcp.deprovision(w.target()).await.expect("delete");
    w.fake.advance(Duration::from_secs(31));
    assert_eq!(w.gcp.deprovision(w.target()).await.expect("done").remaining, 0);
}

#[tokio::test]
async fn each_machine_has_its_private_address_and_a_public_one_while_it_runs() {
    let w = World::new(2, &["europe-west1-b"]).await;
    w.provisioned().await;
    w.fake.advance(Duration::from_secs(61));
    let machines = w.gcp.machine_addresses(w.target()).await.expect("addresses");
    let found: Vec<(&str, bool, bool)> = machines
        .iter()
        .map(|m| {
            let private = m.private_ip.as_deref().is_some_and(|ip| ip.starts_with("10.128."));
            (m.id.as_str(), private, m.public_ip.is_some())
        })
        .collect();
    assert_eq!(found, [("ci-x7k2p-0", true, true), ("ci-x7k2p-1", true, true)]);
    assert_ne!(machines[0].private_ip, machines[1].private_ip);

    assert!(w.gcp.stop_machines(w.target()).await.expect("stop").machines.is_empty());
    w.fake.advance(Duration::from_secs(31));
    let stopped = w.gcp.machine_addresses(w.target()).await.expect("addresses");
    assert!(stopped.iter().all(|m| m.private_ip.is_some() && m.public_ip.is_none()), "{stopped:?}");
}

/// The reaper's look: one aggregated list filtered by the pool's `apiary-pool` label, across zones and pages,
/// each instance by the infraId of its cluster label; another pool's instances and unmarked ones are not listed.
#[tokio::test]
async fn the_reaper_lists_the_pools_instances_by_label_across_zones_and_pages() {
    let w = World::new(3, &["europe-west1-b", "europe-west1-c"]).await;
    w.provisioned().await;
    w.fake.set_page_size(2);
    let elsewhere = [(cluster_label("other").leak() as &str, "owned"), ("apiary-pool", "else")];
    w.fake.add_instance(PROJECT, "europe-west1-b", "other-0", "RUNNING", &elsewhere);
    w.fake.add_instance(PROJECT, "europe-west1-b", "ci-x7k2p-extra", "RUNNING", &[]);
    w.fake.take_log();
    let marked =
        w.gcp.marked("gcp-ci", &w.spec, w.cluster.created_at).await.expect("list").expect("GCP lists what it made");
    let mut found: Vec<(String, String)> = marked.into_iter().map(|m| (m.infra_id, m.machine)).collect();
    found.sort();
    let want = ["ci-x7k2p-0", "ci-x7k2p-1", "ci-x7k2p-2"].map(|n| ("ci-x7k2p".to_owned(), n.to_owned()));
    assert_eq!(found, want);
    let log = w.fake.take_log();
    assert!(log.iter().all(|l| l.contains("aggregated/instances")), "{log:?}");
}

#[tokio::test]
async fn a_pool_the_secret_is_not_tagged_for_is_refused_though_another_pool_holds_a_token_for_it() {
    let w = World::new(3, &["europe-west1-b"]).await;
    w.provisioned().await;
    let made = w.statuses().len();
    let intruder = Target { pool: "intruder", ..w.target() };
    refused_to_intruder(w.gcp.machines_running(intruder).await, ARN);
    refused_to_intruder(w.gcp.provision(Target { pool: "intruder", ..w.target() }).await, ARN);
    refused_to_intruder(w.gcp.marked("intruder", &w.spec, w.cluster.created_at).await, ARN);
    assert_eq!(w.statuses().len(), made, "nothing made for the intruder");
    assert!(w.gcp.machines_running(w.target()).await.is_ok(), "the pool the secret names still uses it");
}

/// A pool's tick looks at many clusters with one aggregated list, its filter a choice of their labels, across
/// zones and pages; each cluster's answer is what the one-cluster calls give, and a cluster with no instance has
/// none.
#[tokio::test]
async fn one_list_looks_at_many_clusters_as_the_one_cluster_calls_do() {
    let w = World::new(3, &["europe-west1-b", "europe-west1-c"]).await;
    w.provisioned().await;
    w.fake.set_page_size(2);
    let second = [(cluster_label("ci-second").leak() as &str, "owned")];
    w.fake.add_instance(PROJECT, "europe-west1-c", "ci-second-0", "TERMINATED", &second);
    w.fake.add_instance(PROJECT, "europe-west1-b", "ci-second-1", "RUNNING", &second);
    w.fake.add_instance(PROJECT, "europe-west1-b", "other-0", "RUNNING", &[(&cluster_label("other"), "owned")]);
    let now = w.cluster.created_at;
    let clusters =
        vec![w.cluster.clone(), Cluster::new("c2", "c2", "ci-second", now), Cluster::new("c3", "c3", "ci-none", now)];
    w.fake.take_log();
    let seen = w.gcp.look_many("gcp-ci", &w.spec, &clusters, now).await.expect("list").expect("GCP looks at many");
    let log = w.fake.take_log();
    assert!(log.iter().all(|l| l.contains("aggregated/instances")), "{log:?}");
    assert_eq!(log.len(), 3, "five instances in pages of two: one list");
    for c in &clusters {
        let t = Target { pool: "gcp-ci", spec: &w.spec, cluster: c, now };
        assert_eq!(seen[&c.id].running, w.gcp.machines_running(t).await.expect("running"), "{}", c.id);
        assert_eq!(seen[&c.id].stopped, w.gcp.machines_stopped(t).await.expect("stopped"), "{}", c.id);
        assert_eq!(seen[&c.id].install, Some(w.gcp.install_state(t).await.expect("install")), "{}", c.id);
    }
    assert_eq!((seen["c2"].running.total, seen["c2"].running.not_ready.len()), (2, 1));
    assert_eq!(seen["c3"].install, Some(apiary_planner::power::Install::Absent));
}
