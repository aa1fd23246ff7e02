//! The webhook provisioner against the reference receiver, which installs on the fake Compute Engine: the contract
//! (install, look, remove), signatures verified and refused when wrong or stale, retries idempotent, a failed
//! attempt and the next one, throttling retried, and the pool's GCP actuator powering the installer's machines.

use std::time::Duration;

use crate::support::installer::{World, INSTALL, KEY, KEY_ARN, PROJECT};
use crate::support::refused_to_intruder;
use apiary_planner::power::Install;
use apiary_ports::platform::{Provision, Target};

#[tokio::test]
async fn the_installer_installs_and_the_platform_powers_the_machines_it_names() {
    let mut w = World::new(KEY).await;
    assert_eq!(w.install_state().await, Install::Absent, "nothing asked yet");
    assert_eq!(w.machinery.provision(w.target()).await.expect("put"), Provision::Accepted { handle: None });
    assert_eq!(w.install_state().await, Install::UnderWay);
    w.later(INSTALL);
    let Install::Installed { infra_id, outputs } = w.install_state().await else { panic!("not installed") };
    assert!(infra_id.starts_with("ci-"), "{infra_id}");
    assert_eq!(outputs.get("apiUrl").map(String::as_str), Some("https://api.ci.ci.example.com:6443"));
    assert!(outputs["kubeconfigSecretArn"].starts_with("arn:aws:secretsmanager:"), "a secret by its ARN only");
    // The planner takes the installer's infraId; the pool's GCP actuator then finds and powers those machines.
    w.cluster.infra_id = infra_id;
    let running = w.machinery.machines_running(w.target()).await.expect("machines");
    assert_eq!((running.total, running.not_ready.len()), (3, 0));
    let refused = w.machinery.stop_machines(w.target()).await.expect("stop");
    assert!(refused.machines.is_empty());
    w.later(Duration::from_secs(30));
    let stopped = w.machinery.machines_stopped(w.target()).await.expect("machines");
    assert_eq!((stopped.total, stopped.not_ready.len()), (3, 0));
}

/// Issue 61: a cluster's inventory entry's parameters (its own addresses) go to the installer with its request.
#[tokio::test]
async fn an_install_request_carries_the_clusters_inventory_parameters() {
    let mut w = World::new(KEY).await;
    w.cluster.parameters.insert("apiVIP".into(), "10.0.0.10".into());
    w.cluster.parameters.insert("ingressVIP".into(), "10.0.0.11".into());
    assert_eq!(w.machinery.provision(w.target()).await.expect("put"), Provision::Accepted { handle: None });
    let sent = w.receiver.parameters("ci-abcde").expect("the installer holds it");
    assert_eq!(sent, w.cluster.parameters);
}

#[tokio::test]
async fn every_call_is_idempotent_by_cluster_and_retried_through_throttling() {
    let w = World::new(KEY).await;
    w.receiver.throttle(2);
    for _ in 0..3 {
        assert_eq!(w.machinery.provision(w.target()).await.expect("put"), Provision::Accepted { handle: None });
    }
    assert_eq!(w.receiver.clusters().len(), 1, "one cluster for every retry");
    assert_eq!(w.gcp.instances(PROJECT).len(), 3, "its machines made once");
    w.receiver.unavailable(1);
    assert_eq!(w.install_state().await, Install::UnderWay, "a 503 is retried");
    let log = w.receiver.take_log();
    assert_eq!(log.iter().filter(|l| l.starts_with("PUT /apiary/clusters/ci-abcde")).count(), 5, "{log:?}");
}

#[tokio::test]
async fn a_wrong_key_or_a_stale_request_is_refused_by_the_receiver_and_named() {
    let wrong = World::new("whsec_bm90IHRoZSBrZXkgdGhlIHJlY2VpdmVyIGhvbGRz").await;
    let e = wrong.machinery.provision(wrong.target()).await.expect_err("refused");
    assert!(!e.is_retryable(), "{e}");
    assert!(e.to_string().contains("no valid signature"), "{e}");
    assert!(wrong.receiver.clusters().is_empty(), "nothing installed");

    let mut stale = World::new(KEY).await;
    stale.now -= chrono::TimeDelta::minutes(10);
    let e = stale.machinery.install_state(stale.target()).await.expect_err("refused");
    assert!(e.to_string().contains("webhook-timestamp"), "{e}");

    let garbled = World::new("not-a-standard-webhooks-key").await;
    let e = garbled.machinery.provision(garbled.target()).await.expect_err("refused");
    assert!(e.to_string().contains(KEY_ARN) && e.to_string().contains("whsec_"), "names the secret: {e}");
    assert!(!e.to_string().contains("not-a-standard-webhooks-key"), "never the key itself: {e}");
}

#[tokio::test]
async fn a_failed_attempt_is_reported_and_the_next_attempt_installs_anew() {
    let mut w = World::new(KEY).await;
    w.receiver.fail_attempts(1);
    w.machinery.provision(w.target()).await.expect("put");
    w.later(INSTALL);
    let Install::Failed { message } = w.install_state().await else { panic!("not failed") };
    assert!(message.contains("bootstrap timed out"), "{message}");
    w.later(Duration::from_secs(30));
    assert!(w.gcp.instances(PROJECT).is_empty(), "the failed run's machines are gone");
    // The planner counts the failure: the next attempt is nothing under way until it is asked for.
    w.cluster.install_failures = 1;
    assert_eq!(w.install_state().await, Install::Absent);
    w.machinery.provision(w.target()).await.expect("put");
    assert_eq!(w.install_state().await, Install::UnderWay);
    w.later(INSTALL);
    assert!(matches!(w.install_state().await, Install::Installed { .. }));
    assert_eq!(w.receiver.clusters().iter().map(|c| c.1).collect::<Vec<_>>(), [2]);
}

#[tokio::test]
async fn a_stalled_install_stays_under_way_for_the_pools_install_timeout_to_catch() {
    let mut w = World::new(KEY).await;
    w.receiver.stall(true);
    w.machinery.provision(w.target()).await.expect("put");
    w.later(INSTALL * 6);
    assert_eq!(w.install_state().await, Install::UnderWay);
}

#[tokio::test]
async fn removal_is_asked_until_the_installer_says_the_cluster_is_gone() {
    let mut w = World::new(KEY).await;
    w.machinery.provision(w.target()).await.expect("put");
    w.later(INSTALL);
    let first = w.machinery.deprovision(w.target()).await.expect("delete");
    assert_eq!((first.remaining, first.refused.len()), (1, 0));
    w.later(Duration::from_secs(30));
    let done = w.machinery.deprovision(w.target()).await.expect("delete");
    assert_eq!((done.remaining, done.refused.len()), (0, 0));
    assert!(w.gcp.instances(PROJECT).is_empty());
    assert!(w.receiver.clusters().is_empty());
    assert_eq!(w.install_state().await, Install::Absent, "a removed cluster is gone for the installer too");
    let again = w.machinery.deprovision(w.target()).await.expect("delete");
    assert_eq!(again.remaining, 0, "removing a gone cluster is done at once");
}

#[test]
fn the_contract_document_describes_what_apiary_sends_and_reads() {
    let doc: serde_json::Value =
        serde_json::from_str(include_str!("../../provisioner.openapi.json")).expect("the contract parses");
    let path = &doc["paths"]["/clusters/{id}"];
    for method in ["put", "get", "delete"] {
        assert!(path[method].is_object(), "{method}");
    }
    let keys = |schema: &str| -> Vec<String> {
        let props = doc["components"]["schemas"][schema]["properties"].as_object().expect("properties");
        props.keys().cloned().collect()
    };
    let request = apiary_clouds::webhook::InstallRequest {
        pool: "p".into(),
        cluster_id: "c".into(),
        cluster_name: "n".into(),
        base_domain: Some("d".into()),
        labels: [("k".to_owned(), "v".to_owned())].into(),
        parameters: [("apiVIP".to_owned(), "10.0.0.10".to_owned())].into(),
        attempt: 1,
        release: Some("quay.io/openshift-release-dev/ocp-release:4.18.2-x86_64".into()),
        install_config_template: Some("aws-4-18".into()),
    };
    let sent: Vec<String> =
        serde_json::to_value(&request).expect("json").as_object().expect("object").keys().cloned().collect();
    let mut documented = keys("InstallRequest");
    documented.sort();
    assert_eq!(sent, documented, "every field sent is documented, and only those");
    let answer = apiary_clouds::webhook::ClusterAnswer {
        state: "Ready".into(),
        attempt: Some(1),
        infra_id: Some("i".into()),
        outputs: [("apiUrl".to_owned(), "u".to_owned())].into(),
        message: Some("m".into()),
        retry_after_seconds: Some(30),
    };
    let read: Vec<String> =
        serde_json::to_value(&answer).expect("json").as_object().expect("object").keys().cloned().collect();
    let mut documented = keys("ClusterState");
    documented.sort();
    assert_eq!(read, documented, "every field read is documented, and only those");
    assert!(doc["paths"]["/clusters"]["get"].is_object(), "the reaper's list");
    let listed = apiary_clouds::webhook::ListedCluster { id: "c".into(), state: "Ready".into() };
    let read: Vec<String> =
        serde_json::to_value(&listed).expect("json").as_object().expect("object").keys().cloned().collect();
    let item = &doc["components"]["schemas"]["ClusterList"]["properties"]["clusters"]["items"]["properties"];
    let mut documented: Vec<String> = item.as_object().expect("properties").keys().cloned().collect();
    documented.sort();
    assert_eq!(read, documented, "every listed field read is documented, and only those");
}

/// The reaper's look through an installer: `GET /clusters?pool=` lists what it holds for the pool by the ids
/// Apiary gave them, signed as every request is; an orphan is removed with the contract's DELETE.
#[tokio::test]
async fn the_installer_lists_the_pools_clusters_and_an_orphan_is_removed_through_it() {
    let mut w = World::new(KEY).await;
    w.machinery.provision(w.target()).await.expect("put");
    let elsewhere =
        Target { pool: "other", cluster: &apiary_planner::Cluster::new("x-1", "x", "x", w.now), ..w.target() };
    w.machinery.provision(elsewhere).await.expect("put");
    w.later(INSTALL);
    let listed = w.machinery.marked("gcp-ci", &w.spec, w.now).await.expect("list").expect("the installer lists");
    let ids: Vec<&str> = listed.iter().map(|m| m.infra_id.as_str()).collect();
    assert_eq!(ids, ["ci-abcde"], "the pool's clusters only, by id");
    let orphan = apiary_ports::platform::orphan("ci-abcde", w.now);
    w.machinery.deprovision(Target { cluster: &orphan, ..w.target() }).await.expect("delete");
    w.later(Duration::from_secs(30));
    let gone = w.machinery.deprovision(Target { cluster: &orphan, ..w.target() }).await.expect("delete");
    assert_eq!(gone.remaining, 0);
    let left = w.machinery.marked("gcp-ci", &w.spec, w.now).await.expect("list").expect("the installer lists");
    assert!(left.is_empty(), "{left:?}");
}

#[tokio::test]
async fn an_installer_is_not_called_for_a_pool_its_key_is_not_tagged_for() {
    let w = World::new(KEY).await;
    refused_to_intruder(w.machinery.provision(Target { pool: "intruder", ..w.target() }).await, KEY_ARN);
    assert!(w.receiver.clusters().is_empty(), "nothing sent to the installer");
    assert_eq!(w.machinery.provision(w.target()).await.expect("put"), Provision::Accepted { handle: None });
}
