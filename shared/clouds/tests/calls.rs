//! What each operation costs in calls to each cloud's API, for a cluster of three machines with credentials
//! already cached (a warm function): the figures of BENCHMARKS.md, asserted so that a change that makes a look
//! or an action dearer is seen. A binary of its own: the call counts are the process's, and another test running
//! beside it would add its calls. `cargo test -p apiary-clouds --test calls -- --nocapture` prints the table.

mod support;

use std::collections::BTreeMap;
use std::future::Future;
use std::time::Duration;

use apiary_clouds::azure::Azure;
use apiary_clouds::gcp::Gcp;
use apiary_clouds::http::Http;
use apiary_clouds::vsphere::Vsphere;
use apiary_fakeclouds::{azure, gcp, vsphere};
use apiary_planner::power::Install;
use apiary_planner::{AzurePlatform, GcpPlatform, Platform, VspherePlatform};
use apiary_ports::platform::{Machinery, Nodes, Provision};
use serde_json::json;
use support::{Aim, MemSecrets, ARN};

/// The calls `f` makes, by operation, and in all.
async fn calls<T>(f: impl Future<Output = T>) -> (T, u64, BTreeMap<String, u64>) {
    let before = apiary_ports::calls::snapshot();
    let out = f.await;
    let made = apiary_ports::calls::since(&before);
    (out, made.values().sum(), made)
}

/// One row per operation: (operation, calls).
type Row = (&'static str, u64);

/// Every operation on one cluster of three machines, stepping `advance` between the install and the rest.
async fn measure(m: &dyn Machinery, aim: &mut Aim, advance: &dyn Fn(Duration)) -> Vec<Row> {
    let mut rows = vec![];
    // Credentials and tokens first, as a warm function holds them.
    let _ = m.machines_running(aim.target()).await.expect("warm up");
    let (p, n, _) = calls(m.provision(aim.target())).await;
    let Ok(Provision::Accepted { handle }) = p else { panic!("provision: {p:?}") };
    aim.cluster.provision_ref = handle;
    rows.push(("provision", n));
    let (s, n, _) = calls(m.install_state(aim.target())).await;
    assert_eq!(s.expect("look"), Install::UnderWay);
    rows.push(("install look, under way", n));
    advance(Duration::from_secs(120));
    let mut looks = 0;
    loop {
        let (s, n, _) = calls(m.install_state(aim.target())).await;
        looks += n;
        match s.expect("look") {
            Install::Done => break,
            // vSphere: the clones exist, untagged: the next provisioning call tags them.
            Install::Absent => {
                let (_, n, _) = calls(m.provision(aim.target())).await;
                rows.push(("provision, second call (tags the clones)", n));
                aim.cluster.provision_ref = None;
            }
            other => panic!("install: {other:?}"),
        }
    }
    rows.push(("install look(s) until done", looks));
    aim.cluster.installed_at = Some(aim.cluster.created_at);
    advance(Duration::from_secs(120));
    let (m_, n, _) = calls(m.machines_stopped(aim.target())).await;
    assert_eq!(m_.expect("look").actionable, 3);
    rows.push(("hibernation look (machines stopped?)", n));
    let (r, n, _) = calls(m.stop_machines(aim.target())).await;
    assert!(r.expect("stop").machines.is_empty());
    rows.push(("stop", n));
    advance(Duration::from_secs(120));
    let (m_, n, _) = calls(m.machines_running(aim.target())).await;
    assert_eq!(m_.expect("look").actionable, 3);
    rows.push(("resume look (machines running?)", n));
    let (r, n, _) = calls(m.start_machines(aim.target())).await;
    assert!(r.expect("start").machines.is_empty());
    rows.push(("start", n));
    advance(Duration::from_secs(120));
    let (ready, n, _) = calls(m.nodes_ready(aim.target())).await;
    assert_eq!(ready.expect("look"), Nodes::Ready);
    rows.push(("nodes look", n));
    let (found, n, _) = calls(m.machine_addresses(aim.target())).await;
    assert_eq!(found.expect("addresses").len(), 3);
    rows.push(("addresses (once per resume)", n));
    // The reaper's look, as a warm process makes it (vSphere reads each new tag category once per process).
    let now = aim.cluster.created_at;
    let (listed, _, _) = calls(m.marked("ci-pool", &aim.spec, now)).await;
    assert_eq!(listed.expect("listed").map(|l| l.is_empty()), Some(false));
    let (_, n, _) = calls(m.marked("ci-pool", &aim.spec, now)).await;
    rows.push(("reaper's look (a warm process)", n));
    aim.cluster.deleting = true;
    let (t, n, _) = calls(m.deprovision(aim.target())).await;
    t.expect("deprovision");
    rows.push(("deprovision, first call", n));
    advance(Duration::from_secs(120));
    let mut left = u64::MAX;
    let mut total = 0;
    while left > 0 {
        let (t, n, _) = calls(m.deprovision(aim.target())).await;
        left = u64::from(t.expect("deprovision").remaining);
        total += n;
    }
    rows.push(("deprovision, until gone", total));
    rows
}

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

#[tokio::test]
async fn calls_per_operation_on_each_cloud() {
    // GCP: three instances in one zone.
    let fake = gcp::FakeGcp::start(gcp::Timings { boot: secs(60), stop: secs(30) }).await.expect("fake");
    fake.add_template("apiary-node");
    // Pages as large as the real APIs' (the fakes' default of two exercises paging elsewhere).
    fake.set_page_size(500);
    let key = fake.service_account("apiary@ci-clusters-1.iam.gserviceaccount.com", "ci-clusters-1");
    let adapter = Gcp::new(Http::new(None).expect("client"), MemSecrets::one(key), Some(fake.endpoint()));
    let mut aim = Aim::new(Platform::Gcp(GcpPlatform {
        project: "ci-clusters-1".into(),
        zone: Some("europe-west1-b".into()),
        zones: vec![],
        instance_template: "apiary-node".into(),
        machine_count: 3,
        credentials_secret: ARN.into(),
        labels: Default::default(),
    }));
    let gcp_rows = measure(&adapter, &mut aim, &|d| fake.advance(d)).await;

    // Azure: a resource group with three VMs from a template.
    let fake =
        azure::FakeAzure::start(azure::Timings { boot: secs(60), stop: secs(30), deploy: secs(90), delete: secs(45) })
            .await
            .expect("fake");
    fake.set_page_size(500);
    let principal = fake.app("11111111-2222-3333-4444-555555555555", "apiary");
    let adapter = Azure::new(
        Http::new(None).expect("client"),
        MemSecrets::one(principal),
        Some(fake.endpoint()),
        Some(fake.authority()),
    );
    let mut aim = Aim::new(Platform::Azure(AzurePlatform {
        subscription_id: "00000000-0000-0000-0000-0000000000aa".into(),
        tenant_id: "11111111-2222-3333-4444-555555555555".into(),
        location: "westeurope".into(),
        resource_group_name: "{infraId}-rg".into(),
        template: Some(json!({
            "parameters": {"infraId": {"type": "string"}},
            "resources": [{"type": "Microsoft.Compute/virtualMachines", "name": "[concat(parameters('infraId'), '-', copyIndex())]", "copy": {"name": "n", "count": 3}}]
        })),
        template_uri: None,
        parameters: Default::default(),
        credentials_secret: ARN.into(),
        tags: Default::default(),
    }));
    let azure_rows = measure(&adapter, &mut aim, &|d| fake.advance(d)).await;

    // vSphere: three clones of a template.
    let fake = vsphere::FakeVsphere::start(vsphere::Timings { clone: secs(60), boot: secs(30), shutdown: secs(20) })
        .await
        .expect("fake");
    fake.add_template("rhcos");
    fake.add_folder("apiary");
    let user = fake.user("apiary@vsphere.local");
    let adapter = Vsphere::new(Http::new(None).expect("client"), MemSecrets::one(user));
    let mut aim = Aim::new(Platform::Vsphere(VspherePlatform {
        server: fake.server(),
        datacenter: "DC1".into(),
        template: "rhcos".into(),
        folder: "apiary".into(),
        resource_pool: None,
        datastore: None,
        machine_count: 3,
        credentials_secret: ARN.into(),
        ca_bundle: Some(fake.ca_bundle()),
        shutdown_grace_period: None,
    }));
    let vsphere_rows = measure(&adapter, &mut aim, &|d| fake.advance(d)).await;

    let mut table = String::from("| operation | GCP | Azure | vSphere |\n|---|---:|---:|---:|\n");
    let ops: Vec<&str> = vsphere_rows.iter().map(|(op, _)| *op).collect();
    let of =
        |rows: &[Row], op: &str| rows.iter().find(|(o, _)| *o == op).map_or("—".to_owned(), |(_, n)| n.to_string());
    for op in &ops {
        table.push_str(&format!(
            "| {op} | {} | {} | {} |\n",
            of(&gcp_rows, op),
            of(&azure_rows, op),
            of(&vsphere_rows, op)
        ));
    }
    eprintln!("\n{table}");
    // The figures of BENCHMARKS.md: a change that makes any of them dearer must say why there.
    let expect = |rows: &[Row], want: &[u64]| {
        let got: Vec<u64> = rows.iter().map(|(_, n)| *n).collect();
        assert_eq!(got, want, "{table}");
    };
    expect(&gcp_rows, &[1, 1, 1, 1, 4, 1, 4, 1, 1, 1, 4, 1]);
    expect(&azure_rows, &[2, 1, 2, 1, 4, 1, 4, 1, 3, 1, 1, 1]);
    expect(&vsphere_rows, &[10, 4, 2, 4, 2, 8, 2, 5, 5, 5, 1, 10, 4]);
}
