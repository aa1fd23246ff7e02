//! The Azure adapter against the fake ARM: machines are a resource group's VMs (every page), start and deallocate
//! re-issued until settled, refusals isolated, a start that fails later said, ephemeral OS disks unsupported,
//! throttling retried, token renewal, provisioning through a deployment per attempt (followed to the end, retried
//! without doubling), and the resource group deleted until it is gone.

use std::time::Duration;

use crate::support::{refused_to_intruder, Aim, MemSecrets, ARN};
use apiary_clouds::azure::{cluster_tag, Azure};
use apiary_clouds::http::Http;
use apiary_fakeclouds::azure::{FakeAzure, Timings};
use apiary_planner::power::Install;
use apiary_planner::{AzurePlatform, Platform};
use apiary_ports::platform::{Actuator, Nodes, Provision, Provisioner, Target};
use serde_json::json;

const SUB: &str = "00000000-0000-0000-0000-0000000000aa";
const TENANT: &str = "11111111-2222-3333-4444-555555555555";
const GROUP: &str = "ci-x7k2p-rg";

/// A template of `machineCount` VMs named `<infraId>-<n>`, and a network it ignores.
fn template() -> serde_json::Value {
    json!({
        "$schema": "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#",
        "contentVersion": "1.0.0.0",
        "parameters": {
            "infraId": {"type": "string"},
            "machineCount": {"type": "int", "defaultValue": 3},
        },
        "resources": [
            {"type": "Microsoft.Network/virtualNetworks", "apiVersion": "2023-09-01",
             "name": "[concat(parameters('infraId'), '-vnet')]", "location": "[resourceGroup().location]"},
            {"type": "Microsoft.Compute/virtualMachines", "apiVersion": "2024-07-01",
             "name": "[concat(parameters('infraId'), '-', copyIndex())]",
             "copy": {"name": "nodes", "count": "[parameters('machineCount')]"},
             "properties": {"hardwareProfile": {"vmSize": "Standard_D4s_v5"}}}
        ]
    })
}

struct World {
    fake: FakeAzure,
    azure: Azure,
    aim: Aim,
}

impl World {
    async fn new(machines: u64) -> Self {
        let fake = FakeAzure::start(Timings {
            boot: Duration::from_secs(60),
            stop: Duration::from_secs(30),
            deploy: Duration::from_secs(90),
            delete: Duration::from_secs(45),
        })
        .await
        .expect("fake");
        let secret = fake.app(TENANT, "apiary-app");
        let http = Http::new(None).expect("client").with_budget(Duration::from_secs(5));
        let azure = Azure::new(http, MemSecrets::one(secret), Some(fake.endpoint()), Some(fake.authority()));
        let platform = AzurePlatform {
            subscription_id: SUB.into(),
            tenant_id: TENANT.into(),
            location: "westeurope".into(),
            resource_group_name: "{infraId}-rg".into(),
            template: Some(template()),
            template_uri: None,
            parameters: [("machineCount".to_owned(), json!(machines))].into_iter().collect(),
            credentials_secret: ARN.into(),
            tags: [("team".to_owned(), "ci".to_owned())].into_iter().collect(),
        };
        Self { fake, azure, aim: Aim::new(Platform::Azure(platform)) }
    }

    fn platform(&mut self) -> &mut AzurePlatform {
        match &mut self.aim.spec.platform {
            Platform::Azure(a) => a,
            _ => unreachable!("an Azure pool"),
        }
    }

    fn powers(&self) -> Vec<String> {
        self.fake.vms(SUB).into_iter().filter(|(rg, _, _)| rg == GROUP).map(|(_, _, p)| p).collect()
    }

    /// Provisions and follows the deployment until every VM runs.
    async fn installed(&mut self) {
        let Provision::Accepted { handle } = self.azure.provision(self.aim.target()).await.expect("call") else {
            panic!("refused")
        };
        self.aim.cluster.provision_ref = handle;
        self.fake.advance(Duration::from_secs(91));
        assert_eq!(self.azure.install_state(self.aim.target()).await.expect("look"), Install::Done);
        self.aim.cluster.provision_ref = None;
    }
}

#[tokio::test]
async fn provisioning_makes_the_group_and_a_deployment_followed_until_every_vm_runs() {
    let mut w = World::new(3).await;
    assert_eq!(w.azure.install_state(w.aim.target()).await.expect("look"), Install::Absent);
    let Provision::Accepted { handle } = w.azure.provision(w.aim.target()).await.expect("call") else {
        panic!("refused")
    };
    let handle = handle.expect("the deployment's Azure-AsyncOperation is kept");
    assert!(handle.starts_with(&w.fake.endpoint()) && handle.contains("operationStatuses"), "{handle}");
    let groups = w.fake.resource_groups(SUB);
    assert_eq!(groups.len(), 1);
    let (name, tags) = &groups[0];
    assert_eq!(name, GROUP);
    assert_eq!(tags[cluster_tag("ci-x7k2p")], "owned");
    assert_eq!((tags["apiary-pool"].as_str(), tags["apiary-cluster"].as_str()), (Some("ci-pool"), Some("ci-abcde")));
    assert_eq!(tags["team"], "ci");
    assert_eq!(w.fake.deployments(SUB, GROUP), [("apiary-1".to_owned(), "Running".to_owned())]);

    // Followed through its Azure-AsyncOperation: under way, then done once every VM runs.
    w.aim.cluster.provision_ref = Some(handle);
    assert_eq!(w.azure.install_state(w.aim.target()).await.expect("look"), Install::UnderWay);
    w.fake.advance(Duration::from_secs(61));
    assert_eq!(w.azure.install_state(w.aim.target()).await.expect("look"), Install::UnderWay, "deploying still");
    w.fake.advance(Duration::from_secs(30));
    assert_eq!(w.azure.install_state(w.aim.target()).await.expect("look"), Install::Done);
    assert_eq!(w.powers(), ["running"; 3]);
    // Without the handle (its answer was lost), the deployment itself is read.
    w.aim.cluster.provision_ref = None;
    w.fake.take_log();
    assert_eq!(w.azure.install_state(w.aim.target()).await.expect("look"), Install::Done);
    assert!(w.fake.take_log().iter().any(|l| l.ends_with("/deployments/apiary-1")));

    // The same attempt again (a retry after a lost answer): the same deployment, nothing doubled.
    assert!(matches!(w.azure.provision(w.aim.target()).await.expect("call"), Provision::Accepted { .. }));
    assert_eq!(w.fake.deployments(SUB, GROUP).len(), 1);
    assert_eq!(w.powers().len(), 3);
}

#[tokio::test]
async fn a_failed_deployment_is_a_failed_attempt_and_the_next_attempt_deploys_anew() {
    let mut w = World::new(3).await;
    w.fake.fail_deployments(Some(("QuotaExceeded", "Operation could not be completed: standardDSv5Family cores")));
    let Provision::Accepted { handle } = w.azure.provision(w.aim.target()).await.expect("call") else {
        panic!("refused")
    };
    w.aim.cluster.provision_ref = handle;
    w.fake.advance(Duration::from_secs(91));
    let Install::Failed { message } = w.azure.install_state(w.aim.target()).await.expect("look") else {
        panic!("failed")
    };
    assert!(message.contains("DeploymentFailed") && message.contains("QuotaExceeded"), "{message}");
    assert_eq!(w.powers().len(), 2, "two of three VMs were made before the quota ran out");

    // The planner counts the attempt: the next is a deployment of its own, which finishes the group.
    w.fake.fail_deployments(None);
    w.aim.cluster.install_failures = 1;
    w.aim.cluster.provision_ref = None;
    assert_eq!(w.azure.install_state(w.aim.target()).await.expect("look"), Install::Absent);
    w.installed().await;
    let deployments: Vec<String> = w.fake.deployments(SUB, GROUP).into_iter().map(|(n, _)| n).collect();
    assert_eq!(deployments, ["apiary-1", "apiary-2"]);
    assert_eq!(w.powers(), ["running"; 3]);
}

#[tokio::test]
async fn a_template_arm_refuses_is_a_refusal_naming_it() {
    let mut w = World::new(3).await;
    w.platform().parameters.insert("vmSize".into(), json!("Standard_D8s_v5"));
    let Provision::Refused(why) = w.azure.provision(w.aim.target()).await.expect("call") else {
        panic!("accepted an undeclared parameter")
    };
    assert!(why.contains("InvalidTemplate") && why.contains("vmSize") && why.contains("apiary-1"), "{why}");
}

#[tokio::test]
async fn a_template_given_by_uri_is_deployed_by_link() {
    let mut w = World::new(2).await;
    let uri = "https://templates.example.com/cluster.json";
    w.fake.add_template_link(uri, template());
    w.platform().template = None;
    w.platform().template_uri = Some(uri.into());
    w.installed().await;
    assert_eq!(w.powers(), ["running"; 2]);
}

#[tokio::test]
async fn machines_are_the_vms_of_the_clusters_group_across_pages() {
    let w = World::new(1).await;
    w.fake.set_page_size(2);
    for n in 0..5 {
        w.fake.add_vm(SUB, GROUP, &format!("ci-x7k2p-{n}"), "running", false);
    }
    w.fake.add_vm(SUB, "other-rg", "ci-x7k2p-9", "running", false);
    let m = w.azure.machines_running(w.aim.target()).await.expect("list");
    assert_eq!((m.total, m.not_ready.len()), (5, 0));
    let log: Vec<String> = w.fake.take_log().into_iter().filter(|l| l.starts_with("GET")).collect();
    // One call a page, the instance views expanded in it: a look costs the same ARM reads for 5 VMs as for 1.
    assert_eq!(log.len(), 3, "five VMs in pages of two, nothing else: {log:?}");
    assert!(log.iter().all(|l| l.ends_with("/virtualMachines")), "{log:?}");
    assert_eq!(w.azure.nodes_ready(w.aim.target()).await.expect("ready"), Nodes::Ready);

    // No group at all: no machine (a cluster not made yet, or gone).
    let mut none = Aim::new(w.aim.spec.platform.clone());
    none.cluster.infra_id = "nobody".into();
    assert_eq!(w.azure.machines_running(none.target()).await.expect("list").total, 0);
}

#[tokio::test]
async fn deallocate_and_start_are_reissued_until_the_vms_settle() {
    let mut w = World::new(2).await;
    w.installed().await;
    assert!(w.azure.stop_machines(w.aim.target()).await.expect("stop").machines.is_empty());
    assert_eq!(w.powers(), ["deallocating"; 2]);
    // Again while deallocating: nothing is acted on, nothing refused.
    w.fake.take_log();
    assert!(w.azure.stop_machines(w.aim.target()).await.expect("stop again").machines.is_empty());
    assert!(w.fake.take_log().iter().all(|l| !l.ends_with("/deallocate")));
    // A start while deallocating is left for a later look; the VMs are not stopped yet.
    assert!(w.azure.start_machines(w.aim.target()).await.expect("start").machines.is_empty());
    let m = w.azure.machines_stopped(w.aim.target()).await.expect("list");
    assert_eq!((m.not_ready.len(), m.actionable), (2, 0));
    w.fake.advance(Duration::from_secs(31));
    assert!(w.azure.machines_stopped(w.aim.target()).await.expect("list").not_ready.is_empty());
    assert_eq!(w.powers(), ["deallocated"; 2]);
    assert!(w.azure.start_machines(w.aim.target()).await.expect("start").machines.is_empty());
    assert_eq!(w.powers(), ["starting"; 2]);
    let starting = w.azure.nodes_ready(w.aim.target()).await.expect("ready");
    assert!(matches!(starting, Nodes::Machines(ref m) if m.not_ready.len() == 2), "{starting:?}");
    w.fake.advance(Duration::from_secs(61));
    assert!(w.azure.machines_running(w.aim.target()).await.expect("list").not_ready.is_empty());
    assert_eq!(w.azure.nodes_ready(w.aim.target()).await.expect("ready"), Nodes::Ready);
}

#[tokio::test]
async fn a_powered_off_vm_is_still_billed_and_is_deallocated() {
    let w = World::new(1).await;
    w.fake.add_vm(SUB, GROUP, "ci-x7k2p-0", "stopped", false);
    let m = w.azure.machines_stopped(w.aim.target()).await.expect("list");
    assert_eq!((m.not_ready.len(), m.actionable), (1, 1), "stopped is not hibernated");
    assert!(w.azure.stop_machines(w.aim.target()).await.expect("stop").machines.is_empty());
    assert_eq!(w.powers(), ["deallocating"]);
    // For a resume, a powered-off VM is simply started.
    assert_eq!(w.azure.machines_running(w.aim.target()).await.expect("list").actionable, 0, "deallocating");
}

#[tokio::test]
async fn an_ephemeral_os_disk_makes_hibernation_unsupported_and_nothing_is_deallocated() {
    let w = World::new(1).await;
    w.fake.add_vm(SUB, GROUP, "ci-x7k2p-0", "running", false);
    w.fake.add_vm(SUB, GROUP, "ci-x7k2p-1", "running", true);
    let m = w.azure.machines_stopped(w.aim.target()).await.expect("list");
    assert_eq!(m.unsupported.len(), 1);
    assert_eq!(m.unsupported[0].0, "ci-x7k2p-1");
    assert!(m.unsupported_message().is_some_and(|s| s.contains("ephemeral")), "{m:?}");
    // Even if asked, the ephemeral VM is never sent a deallocation Azure would refuse.
    w.fake.take_log();
    assert!(w.azure.stop_machines(w.aim.target()).await.expect("stop").machines.is_empty());
    let log = w.fake.take_log();
    assert!(!log.iter().any(|l| l.ends_with("ci-x7k2p-1/deallocate")), "{log:?}");
}

#[tokio::test]
async fn one_refusing_vm_does_not_block_the_others() {
    let mut w = World::new(3).await;
    w.installed().await;
    w.fake.refuse("ci-x7k2p-1");
    let refused = w.azure.stop_machines(w.aim.target()).await.expect("stop");
    assert_eq!(refused.machines.len(), 1);
    assert_eq!(refused.machines[0].0, "ci-x7k2p-1");
    assert!(refused.machines[0].1.contains("403 AuthorizationFailed"), "{:?}", refused.machines);
    assert_eq!(w.powers(), ["deallocating", "running", "deallocating"]);
}

#[tokio::test]
async fn a_start_that_fails_for_want_of_capacity_is_reissued_and_said() {
    let w = World::new(1).await;
    w.fake.add_vm(SUB, GROUP, "ci-x7k2p-0", "deallocated", false);
    w.fake.no_capacity("ci-x7k2p-0");
    assert!(w.azure.start_machines(w.aim.target()).await.expect("start").machines.is_empty(), "accepted");
    w.fake.advance(Duration::from_secs(61));
    assert_eq!(w.powers(), ["deallocated"], "the start failed after it was accepted");
    w.fake.take_log();
    let refused = w.azure.start_machines(w.aim.target()).await.expect("start again");
    assert!(w.fake.take_log().iter().any(|l| l.ends_with("ci-x7k2p-0/start")), "re-issued");
    assert_eq!(refused.machines.len(), 1);
    assert!(refused.machines[0].1.contains("AllocationFailed"), "{:?}", refused.machines);
    // Capacity comes back: the start re-issued after that runs it.
    w.fake.comply("ci-x7k2p-0");
    w.fake.advance(Duration::from_secs(61));
    let _ = w.azure.start_machines(w.aim.target()).await.expect("start");
    w.fake.advance(Duration::from_secs(61));
    assert_eq!(w.powers(), ["running"]);
}

#[tokio::test]
async fn throttling_and_unavailability_are_retried_within_the_budget() {
    let w = World::new(1).await;
    w.fake.add_vm(SUB, GROUP, "ci-x7k2p-0", "running", false);
    w.fake.throttle(2);
    w.fake.unavailable(1);
    assert_eq!(w.azure.machines_running(w.aim.target()).await.expect("retried").total, 1);
    w.fake.unavailable(1000);
    let err = w.azure.machines_running(w.aim.target()).await.expect_err("budget spent");
    assert!(err.is_retryable() && err.to_string().contains("503"), "{err}");
}

#[tokio::test]
async fn an_expired_token_is_renewed_once() {
    let w = World::new(1).await;
    w.fake.add_vm(SUB, GROUP, "ci-x7k2p-0", "running", false);
    w.azure.machines_running(w.aim.target()).await.expect("list");
    w.azure.machines_running(w.aim.target()).await.expect("list");
    assert_eq!(w.fake.tokens_issued(), 1, "one token while it is valid");
    w.fake.expire_tokens();
    assert_eq!(w.azure.machines_running(w.aim.target()).await.expect("renewed").total, 1);
    assert_eq!(w.fake.tokens_issued(), 2);
}

#[tokio::test]
async fn a_wrong_secret_is_refused_by_the_tenant_without_showing_it() {
    let w = World::new(1).await;
    let wrong = json!({"clientId": "apiary-app", "clientSecret": "not-the-secret"}).to_string();
    let azure = Azure::new(
        Http::new(None).expect("client"),
        MemSecrets::one(wrong),
        Some(w.fake.endpoint()),
        Some(w.fake.authority()),
    );
    let err = azure.machines_running(w.aim.target()).await.expect_err("refused");
    let text = err.to_string();
    assert!(!err.is_retryable() && text.contains("invalid_client") && text.contains(TENANT), "{text}");
    assert!(!text.contains("not-the-secret"), "{text}");
}

#[tokio::test]
async fn deprovision_deletes_the_group_until_it_is_gone_and_a_lock_is_a_refusal() {
    let mut w = World::new(2).await;
    w.installed().await;
    w.fake.lock_group(GROUP);
    let t = w.azure.deprovision(w.aim.target()).await.expect("delete");
    assert_eq!(t.refused.len(), 1);
    assert!(t.refused[0].1.contains("ScopeLocked"), "{:?}", t.refused);
    w.fake.unlock(GROUP);
    let t = w.azure.deprovision(w.aim.target()).await.expect("delete");
    assert_eq!((t.remaining, t.refused.len()), (1, 0), "being deleted");
    let t = w.azure.deprovision(w.aim.target()).await.expect("delete again");
    assert_eq!((t.remaining, t.refused.len()), (1, 0));
    w.fake.advance(Duration::from_secs(46));
    let t = w.azure.deprovision(w.aim.target()).await.expect("gone");
    assert_eq!((t.remaining, t.refused.len()), (0, 0));
    assert!(w.fake.resource_groups(SUB).is_empty() && w.fake.vms(SUB).is_empty());
}

#[tokio::test]
async fn each_vm_has_its_nics_private_address_and_its_public_one_while_allocated() {
    let mut w = World::new(2).await;
    w.installed().await;
    w.fake.advance(Duration::from_secs(61));
    w.fake.take_log();
    let machines = w.azure.machine_addresses(w.aim.target()).await.expect("addresses");
    assert_eq!(machines.len(), 2);
    for m in &machines {
        assert!(m.private_ip.as_deref().is_some_and(|ip| ip.starts_with("10.1.")), "{m:?}");
        assert!(m.public_ip.as_deref().is_some_and(|ip| ip.starts_with("192.0.2.")), "{m:?}");
    }
    assert_ne!(machines[0].private_ip, machines[1].private_ip);
    let lists: Vec<String> = w.fake.take_log().into_iter().filter(|l| l.starts_with("GET")).collect();
    assert_eq!(lists.len(), 3, "the VMs, the network interfaces and the public addresses, a list each: {lists:?}");

    assert!(w.azure.stop_machines(w.aim.target()).await.expect("stop").machines.is_empty());
    w.fake.advance(Duration::from_secs(31));
    let deallocated = w.azure.machine_addresses(w.aim.target()).await.expect("addresses");
    assert!(deallocated.iter().all(|m| m.private_ip.is_some() && m.public_ip.is_none()), "{deallocated:?}");
}

/// The reaper's look: one list of the subscription's resource groups filtered by the pool's `apiary-pool` tag,
/// every page, each group by the infraId of its cluster tag; another pool's groups, unmarked ones and groups
/// already being deleted are not listed.
#[tokio::test]
async fn the_reaper_lists_the_pools_resource_groups_by_tag_across_pages() {
    let mut w = World::new(1).await;
    for (cluster, infra) in [("ci-1", "ci-aaaaa"), ("ci-2", "ci-bbbbb"), ("ci-3", "ci-ccccc")] {
        w.aim.cluster = apiary_planner::Cluster::new(cluster, cluster, infra, w.aim.cluster.created_at);
        assert!(matches!(w.azure.provision(w.aim.target()).await.expect("call"), Provision::Accepted { .. }));
    }
    w.aim.cluster = apiary_planner::Cluster::new("else-1", "else", "else-zzzzz", w.aim.cluster.created_at);
    let elsewhere = Target { pool: "else-pool", ..w.aim.target() };
    assert!(matches!(w.azure.provision(elsewhere).await.expect("call"), Provision::Accepted { .. }));
    w.fake.add_resource_group(SUB, "hand-made-rg", "westeurope");
    w.aim.cluster = apiary_planner::Cluster::new("ci-3", "ci-3", "ci-ccccc", w.aim.cluster.created_at);
    w.azure.deprovision(w.aim.target()).await.expect("deleting");
    w.fake.set_page_size(1);
    w.fake.take_log();
    let marked = w
        .azure
        .marked("ci-pool", &w.aim.spec, w.aim.cluster.created_at)
        .await
        .expect("list")
        .expect("Azure lists what it made");
    let found: Vec<(String, String)> = marked.into_iter().map(|m| (m.infra_id, m.machine)).collect();
    assert_eq!(
        found,
        [("ci-aaaaa".to_owned(), "ci-aaaaa-rg".to_owned()), ("ci-bbbbb".to_owned(), "ci-bbbbb-rg".to_owned())]
    );
    let log = w.fake.take_log();
    assert!(log.len() >= 2 && log.iter().all(|l| l.contains("/resourcegroups")), "{log:?}");
}

#[tokio::test]
async fn a_pool_the_secret_is_not_tagged_for_is_refused_though_another_pool_holds_a_token_for_it() {
    let w = World::new(3).await;
    assert!(w.azure.machines_running(w.aim.target()).await.is_ok(), "the pool the secret names uses it");
    refused_to_intruder(w.azure.machines_running(Target { pool: "intruder", ..w.aim.target() }).await, ARN);
    refused_to_intruder(w.azure.provision(Target { pool: "intruder", ..w.aim.target() }).await, ARN);
    refused_to_intruder(w.azure.marked("intruder", &w.aim.spec, w.aim.cluster.created_at).await, ARN);
}
