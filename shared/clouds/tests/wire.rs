//! Each cloud adapter's whole lifecycle against its fake, every request and answer recorded: what
//! `tests/conformance_<cloud>.py` (`make conformance`) holds against the vendor's own description of the API. With
//! `APIARY_WIRE_OUT` set to a directory, each cloud's exchanges are written there as `<cloud>.json`.

mod support;

use std::time::Duration;

use apiary_clouds::azure::Azure;
use apiary_clouds::gcp::Gcp;
use apiary_clouds::http::Http;
use apiary_clouds::kubernetes::KubernetesReadiness;
use apiary_clouds::vsphere::Vsphere;
use apiary_fakeclouds::azure::FakeAzure;
use apiary_fakeclouds::cluster_api::FakeClusterApi;
use apiary_fakeclouds::common::Exchange;
use apiary_fakeclouds::gcp::{FakeGcp, Timings};
use apiary_fakeclouds::vsphere::FakeVsphere;
use apiary_planner::power::{Install, Readiness};
use apiary_planner::{
    AzurePlatform, FakePlatform, GcpPlatform, KubernetesCheck, Platform, ReadinessSpec, VspherePlatform,
};
use apiary_ports::platform::{Actuator, Nodes, Provision, Provisioner, ReadinessCheck};
use serde_json::json;
use support::{Aim, MemSecrets, ARN};

/// Writes `wire` to `$APIARY_WIRE_OUT/<cloud>.json` when that is set.
fn write_out(cloud: &str, wire: &[Exchange]) {
    if let Some(dir) = std::env::var_os("APIARY_WIRE_OUT") {
        let path = std::path::Path::new(&dir).join(format!("{cloud}.json"));
        std::fs::write(path, serde_json::to_vec_pretty(wire).expect("json")).expect("written");
    }
}

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
    write_out("gcp", &wire);
}

#[tokio::test]
async fn the_azure_adapters_lifecycle_is_recorded_on_the_wire() {
    let second = Duration::from_secs(1);
    let fake = FakeAzure::start(apiary_fakeclouds::azure::Timings {
        boot: 60 * second,
        stop: 30 * second,
        deploy: 90 * second,
        delete: 45 * second,
    })
    .await
    .expect("fake");
    // Pages of two: three VMs take two pages, so the nextLink is followed.
    fake.set_page_size(2);
    fake.record();
    let tenant = "11111111-2222-3333-4444-555555555555";
    let azure = Azure::new(
        Http::new(None).expect("client"),
        MemSecrets::one(fake.app(tenant, "apiary-app")),
        Some(fake.endpoint()),
        Some(fake.authority()),
    );
    let template = json!({
        "$schema": "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#",
        "contentVersion": "1.0.0.0",
        "parameters": {"infraId": {"type": "string"}, "machineCount": {"type": "int", "defaultValue": 3}},
        "resources": [{"type": "Microsoft.Compute/virtualMachines", "apiVersion": "2024-07-01",
                       "name": "[concat(parameters('infraId'), '-', copyIndex())]",
                       "copy": {"name": "nodes", "count": "[parameters('machineCount')]"},
                       "properties": {"hardwareProfile": {"vmSize": "Standard_D4s_v5"}}}]
    });
    let platform = Platform::Azure(AzurePlatform {
        subscription_id: "00000000-0000-0000-0000-0000000000aa".into(),
        tenant_id: tenant.into(),
        location: "westeurope".into(),
        resource_group_name: "{infraId}-rg".into(),
        template: Some(template),
        template_uri: None,
        parameters: [("machineCount".to_owned(), json!(3))].into_iter().collect(),
        credentials_secret: ARN.into(),
        tags: [("team".to_owned(), "ci".to_owned())].into_iter().collect(),
    });
    let mut aim = Aim::new(platform.clone());
    let later = |s: u64| fake.advance(Duration::from_secs(s));

    let Provision::Accepted { handle } = azure.provision(aim.target()).await.expect("provision") else {
        panic!("refused")
    };
    aim.cluster.provision_ref = handle;
    assert_eq!(azure.install_state(aim.target()).await.expect("look"), Install::UnderWay);
    later(91);
    assert_eq!(azure.install_state(aim.target()).await.expect("look"), Install::Done);
    aim.cluster.provision_ref = None;
    assert_eq!(azure.install_state(aim.target()).await.expect("look"), Install::Done, "read from the deployment");
    assert_eq!(azure.machines_running(aim.target()).await.expect("running").total, 3);
    assert_eq!(azure.machine_addresses(aim.target()).await.expect("addresses").len(), 3);
    assert!(azure.stop_machines(aim.target()).await.expect("stop").machines.is_empty());
    later(31);
    assert_eq!(azure.machines_stopped(aim.target()).await.expect("stopped").not_ready.len(), 0);
    assert!(azure.start_machines(aim.target()).await.expect("start").machines.is_empty());
    later(61);
    // A throttled answer and an unavailable one, retried: their error bodies are on the wire too.
    fake.throttle(1);
    fake.unavailable(1);
    assert_eq!(azure.machines_running(aim.target()).await.expect("running").not_ready.len(), 0);
    // A second cluster of the pool, so the pool's resource groups take two pages.
    let mut other = Aim::new(platform);
    other.cluster.infra_id = "ci-q9w8e".into();
    other.cluster.id = "ci-fghij".into();
    assert!(matches!(azure.provision(other.target()).await.expect("provision"), Provision::Accepted { .. }));
    fake.set_page_size(1);
    let marked = azure.marked("ci-pool", &aim.spec, aim.cluster.created_at).await.expect("list").expect("Azure lists");
    assert_eq!(marked.len(), 2);
    for a in [&aim, &other] {
        while azure.deprovision(a.target()).await.expect("delete").remaining > 0 {
            later(46);
        }
    }

    let wire = fake.take_wire();
    let calls: Vec<String> = wire.iter().map(|e| format!("{} {}", e.method, e.path)).collect();
    for wanted in ["/deployments/apiary-1", "/operationStatuses/", "/deallocate", "/start", "/networkInterfaces"] {
        assert!(calls.iter().any(|c| c.contains(wanted)), "{wanted} is on the wire: {calls:#?}");
    }
    assert!(wire.iter().any(|e| e.query.iter().any(|(k, _)| k == "$skiptoken")), "a second page was asked for");
    assert!(wire.iter().any(|e| e.query.iter().any(|(k, v)| k == "$expand" && v == "instanceView")), "{calls:#?}");
    assert!(wire.iter().any(|e| e.method == "DELETE"), "{calls:#?}");
    write_out("azure", &wire);
}

#[tokio::test]
async fn the_kubernetes_readiness_checks_requests_are_recorded_on_the_wire() {
    let api = FakeClusterApi::start(Duration::ZERO).await.expect("fake");
    // Pages of two: three nodes and four ClusterOperators take two pages each, so `continue` is followed.
    api.page(2);
    api.certificates_valid(Duration::from_secs(60), Duration::from_secs(30 * 24 * 3600));
    api.record();
    let check = KubernetesReadiness::new(Http::new(None).expect("client"), MemSecrets::one(api.token().into()));
    let mut aim = Aim::new(Platform::Fake(FakePlatform::default()));
    let kubernetes = KubernetesCheck {
        credentials: ARN.into(),
        server: Some(api.server("{infraId}")),
        ca_bundle: Some(api.ca_bundle()),
        approve_node_certificates: None,
    };
    aim.spec.readiness = Some(ReadinessSpec { https: None, kubernetes: Some(kubernetes), settle_pause: None });
    assert_eq!(check.nodes(aim.target()).await.expect("nodes").map(|f| f.readiness), Some(Readiness::Ready));
    assert_eq!(check.check(aim.target()).await.expect("operators"), Readiness::Ready);
    // Then a resume past the kubelets' certificates: the requests, the Machines and the approvals.
    api.advance(Duration::from_secs(3600));
    aim.cluster.transition_started_at = Some(api.now());
    let found = check.nodes(aim.target()).await.expect("nodes").expect("the check reads nodes");
    assert_eq!(found.certificates.approved.len(), 6, "{found:?}");
    let wire = api.take_wire();
    assert!(wire.iter().filter(|e| e.query.iter().any(|(k, _)| k == "continue")).count() >= 4, "{wire:#?}");
    let calls: Vec<String> = wire.iter().map(|e| format!("{} {}", e.method, e.path)).collect();
    for wanted in ["GET /x/apis/certificates.k8s.io/v1/certificatesigningrequests", "/machines", "/approval"] {
        let wanted = wanted.replace("/x/", "/ci-x7k2p/");
        assert!(calls.iter().any(|c| c.contains(&wanted)), "{wanted}: {calls:#?}");
    }
    write_out("kubernetes", &wire);
}

#[tokio::test]
async fn the_vsphere_adapters_lifecycle_is_recorded_on_the_wire() {
    let fake = FakeVsphere::start(apiary_fakeclouds::vsphere::Timings {
        clone: Duration::from_secs(60),
        boot: Duration::from_secs(30),
        shutdown: Duration::from_secs(20),
    })
    .await
    .expect("fake");
    fake.add_template("rhcos-4.16");
    fake.add_folder("ci-clusters");
    fake.record();
    let vsphere = Vsphere::new(Http::new(None).expect("client"), MemSecrets::one(fake.user("apiary@vsphere.local")));
    let mut aim = Aim::new(Platform::Vsphere(VspherePlatform {
        server: fake.server(),
        datacenter: "DC1".into(),
        template: "rhcos-4.16".into(),
        folder: "ci-clusters".into(),
        resource_pool: Some("Resources".into()),
        datastore: Some("datastore1".into()),
        machine_count: 3,
        credentials_secret: ARN.into(),
        ca_bundle: Some(fake.ca_bundle()),
        shutdown_grace_period: None,
    }));
    let later = |s: u64| fake.advance(Duration::from_secs(s));

    let Provision::Accepted { handle } = vsphere.provision(aim.target()).await.expect("provision") else {
        panic!("refused")
    };
    aim.cluster.provision_ref = handle;
    assert_eq!(vsphere.install_state(aim.target()).await.expect("look"), Install::UnderWay);
    later(61);
    assert!(matches!(vsphere.provision(aim.target()).await.expect("tag"), Provision::Accepted { .. }));
    aim.cluster.provision_ref = None;
    assert_eq!(vsphere.install_state(aim.target()).await.expect("look"), Install::Done);
    later(31);
    assert_eq!(vsphere.nodes_ready(aim.target()).await.expect("nodes"), Nodes::Ready);
    assert_eq!(vsphere.machine_addresses(aim.target()).await.expect("addresses").len(), 3);
    assert!(vsphere.stop_machines(aim.target()).await.expect("stop").machines.is_empty());
    // Asked again once the session expired: the 401 and a new session are on the wire too.
    fake.expire_sessions();
    assert!(vsphere.stop_machines(aim.target()).await.expect("stop again").machines.is_empty());
    later(21);
    assert_eq!(vsphere.machines_stopped(aim.target()).await.expect("stopped").not_ready.len(), 0);
    assert!(vsphere.start_machines(aim.target()).await.expect("start").machines.is_empty());
    // A throttled answer and an unavailable one, retried: their error bodies are on the wire too.
    fake.throttle(1);
    fake.unavailable(1);
    assert_eq!(vsphere.machines_running(aim.target()).await.expect("running").not_ready.len(), 0);
    // The pool's tick: the VMs of every cluster's tag with one call, then one VM list.
    let now = aim.cluster.created_at;
    let many = vsphere.look_many("ci-pool", &aim.spec, std::slice::from_ref(&aim.cluster), now).await.expect("look");
    assert_eq!(many.expect("vSphere looks at many")[&aim.cluster.id].running.total, 3);
    let marked = vsphere.marked("ci-pool", &aim.spec, aim.cluster.created_at).await.expect("list");
    assert_eq!(marked.map(|m| m.len()), Some(1), "one category per cluster");
    loop {
        if vsphere.deprovision(aim.target()).await.expect("delete").remaining == 0 {
            break;
        }
        later(61);
    }

    let wire = fake.take_wire();
    let calls: Vec<String> = wire.iter().map(|e| format!("{} {}", e.method, e.path)).collect();
    for wanted in ["/api/session", "/api/cis/tasks/", "/guest/power", "/power", "/api/cis/tagging/tag-association"] {
        assert!(calls.iter().any(|c| c.contains(wanted)), "{wanted} is on the wire: {calls:#?}");
    }
    assert!(wire.iter().any(|e| e.method == "DELETE" && e.path.starts_with("/api/vcenter/vm/")), "{calls:#?}");
    let statuses: std::collections::BTreeSet<u16> = wire.iter().map(|e| e.status).filter(|s| *s >= 400).collect();
    assert_eq!(statuses.into_iter().collect::<Vec<_>>(), [401, 429, 503], "the errors on the wire: {calls:#?}");
    write_out("vsphere", &wire);
}
