//! The GCP adapter's whole lifecycle against the fake Compute API, every request and answer recorded: what
//! `tests/conformance_gcp.py` (`make conformance`) holds against Google's own description of the API. A binary of
//! its own, so the recording holds this test's exchanges only. With `APIARY_WIRE_OUT` set, the exchanges are written
//! there as JSON.

mod support;

use std::time::Duration;

use apiary_clouds::gcp::Gcp;
use apiary_clouds::http::Http;
use apiary_fakeclouds::gcp::{FakeGcp, Timings};
use apiary_planner::power::Install;
use apiary_planner::{GcpPlatform, Platform};
use apiary_ports::platform::{Actuator, Provision, Provisioner};
use support::{Aim, MemSecrets, ARN};

const PROJECT: &str = "ci-clusters-1";

#[tokio::test]
async fn the_gcp_adapters_lifecycle_is_recorded_on_the_wire() {
    let fake =
        FakeGcp::start(Timings { boot: Duration::from_secs(60), stop: Duration::from_secs(30) }).await.expect("fake");
    fake.add_template("apiary-node");
    // Pages of two: three machines over two zones take two pages, so the page token is followed.
    fake.set_page_size(2);
    fake.record();
    let key = fake.service_account("apiary@ci-clusters-1.iam.gserviceaccount.com", PROJECT);
    let gcp = Gcp::new(Http::new(None).expect("client"), MemSecrets::one(key), Some(fake.endpoint()));
    let mut aim = Aim::new(Platform::Gcp(GcpPlatform {
        project: PROJECT.into(),
        zone: None,
        zones: vec!["europe-west1-b".into(), "europe-west1-c".into()],
        instance_template: "apiary-node".into(),
        machine_count: 3,
        credentials_secret: ARN.into(),
        labels: [("team".to_owned(), "ci".to_owned())].into_iter().collect(),
    }));
    let later = |s: u64| fake.advance(Duration::from_secs(s));

    let Provision::Accepted { handle } = gcp.provision(aim.target()).await.expect("provision") else {
        panic!("refused")
    };
    aim.cluster.provision_ref = handle;
    assert_eq!(gcp.install_state(aim.target()).await.expect("look"), Install::UnderWay);
    later(61);
    assert_eq!(gcp.install_state(aim.target()).await.expect("look"), Install::Done);
    assert_eq!(gcp.machines_running(aim.target()).await.expect("running").total, 3);
    assert!(gcp.stop_machines(aim.target()).await.expect("stop").machines.is_empty());
    later(31);
    assert_eq!(gcp.machines_stopped(aim.target()).await.expect("stopped").not_ready.len(), 0);
    assert!(gcp.start_machines(aim.target()).await.expect("start").machines.is_empty());
    later(61);
    assert_eq!(gcp.machines_running(aim.target()).await.expect("running").not_ready.len(), 0);
    let marked = gcp.marked("ci-pool", &aim.spec, aim.cluster.created_at).await.expect("list").expect("GCP lists");
    assert_eq!(marked.len(), 3);
    loop {
        let t = gcp.deprovision(aim.target()).await.expect("delete");
        if t.remaining == 0 {
            break;
        }
        later(31);
    }

    let wire = fake.take_wire();
    let calls: Vec<String> = wire.iter().map(|e| format!("{} {}", e.method, e.path)).collect();
    for wanted in ["/aggregated/instances", "/instances/bulkInsert", "/stop", "/start"] {
        assert!(calls.iter().any(|c| c.contains(wanted)), "{wanted} is on the wire: {calls:#?}");
    }
    assert!(wire.iter().any(|e| e.query.iter().any(|(k, _)| k == "pageToken")), "a second page was asked for");
    assert!(wire.iter().any(|e| e.method == "DELETE"), "{calls:#?}");
    if let Some(out) = std::env::var_os("APIARY_WIRE_OUT") {
        std::fs::write(out, serde_json::to_vec_pretty(&wire).expect("json")).expect("written");
    }
}
