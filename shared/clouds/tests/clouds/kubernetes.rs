//! The Kubernetes readiness check against the fake cluster API: nodes Ready late or never, ClusterOperators that
//! settle late, never or flap, a kubeconfig with a client certificate or a token, a bare token with the check's
//! server, refused credentials, paged lists, a plain Kubernetes cluster, an unreachable one, and the nodes asked
//! through a pool's machinery while its resume waits for them.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use crate::readiness::NoMachines;
use crate::support::{refused_to_intruder, Aim, MemSecrets, ARN};
use apiary_clouds::http::Http;
use apiary_clouds::kubernetes::KubernetesReadiness;
use apiary_fakeclouds::cluster_api::{Auth, FakeClusterApi};
use apiary_planner::power::Readiness;
use apiary_planner::{FakePlatform, KubernetesCheck, Platform, ReadinessSpec};
use apiary_ports::platform::{Nodes, Platforms, ReadinessCheck, Target};

const LATE: Duration = Duration::from_secs(120);
const INFRA: &str = "ci-x7k2p";

struct World {
    api: FakeClusterApi,
    check: KubernetesReadiness,
    aim: Aim,
}

/// A pool whose check reads the credentials in `secret` (the cluster's `kubeconfigSecretArn` output names it),
/// naming the server and its CA itself when `own_server`.
async fn world(secret: impl FnOnce(&FakeClusterApi) -> String, own_server: bool) -> World {
    let api = FakeClusterApi::start(LATE).await.expect("fake");
    let secrets = Arc::new(MemSecrets([(ARN.to_owned(), secret(&api))].into_iter().collect::<HashMap<_, _>>()));
    let check = KubernetesReadiness::new(Http::new(None).expect("client"), secrets);
    let mut aim = Aim::new(Platform::Fake(FakePlatform::default()));
    aim.cluster.outputs.insert("kubeconfigSecretArn".into(), ARN.into());
    let kubernetes = KubernetesCheck {
        credentials: "{outputs.kubeconfigSecretArn}".into(),
        server: own_server.then(|| api.server("{infraId}")),
        ca_bundle: own_server.then(|| api.ca_bundle()),
        approve_node_certificates: None,
    };
    aim.spec.readiness = Some(ReadinessSpec { https: None, kubernetes: Some(kubernetes), settle_pause: None });
    World { api, check, aim }
}

fn kubeconfig(auth: Auth) -> impl FnOnce(&FakeClusterApi) -> String {
    move |api| api.kubeconfig(INFRA, auth).expect("kubeconfig")
}

/// What a look at the nodes found, as a readiness.
async fn nodes_of(check: &KubernetesReadiness, t: Target<'_>) -> Option<Readiness> {
    check.nodes(t).await.expect("look").map(|found| found.readiness)
}

fn not_ready(r: Readiness) -> String {
    match r {
        Readiness::NotReady { message } => message,
        other => panic!("not ready expected, got {other:?}"),
    }
}

#[tokio::test]
async fn with_an_installers_kubeconfig_the_nodes_then_the_operators_are_checked() {
    let w = world(kubeconfig(Auth::ClientCertificate), false).await;
    w.api.nodes_after(LATE / 2);
    let message = not_ready(nodes_of(&w.check, w.aim.target()).await.expect("the check reads nodes"));
    assert!(
        message.starts_with("3 of 3 nodes are not Ready: ci-x7k2p-master-0 (Ready=False: KubeletNotReady"),
        "{message}"
    );
    w.api.advance(LATE / 2);
    assert_eq!(nodes_of(&w.check, w.aim.target()).await, Some(Readiness::Ready));

    let message = not_ready(w.check.check(w.aim.target()).await.expect("look"));
    assert!(
        message.starts_with("2 of 4 ClusterOperators have not settled: authentication (Available=False"),
        "{message}"
    );
    assert!(
        message.contains("Degraded=True: OAuthServerDeployment_UnavailablePod")
            && message.contains("etcd (Progressing=True")
    );
    w.api.advance(LATE / 2);
    assert_eq!(w.check.check(w.aim.target()).await.expect("look"), Readiness::Ready);
    assert_eq!(
        w.api.take_log(),
        [
            "GET /ci-x7k2p/api/v1/nodes",
            "GET /ci-x7k2p/apis/certificates.k8s.io/v1/certificatesigningrequests",
            "GET /ci-x7k2p/api/v1/nodes",
            "GET /ci-x7k2p/apis/config.openshift.io/v1/clusteroperators",
            "GET /ci-x7k2p/apis/config.openshift.io/v1/clusteroperators"
        ],
        "one request per look, and the certificate requests (none) while nodes are not Ready"
    );
}

#[tokio::test]
async fn a_kubeconfig_with_a_token_and_a_bare_token_with_the_checks_server_both_get_in() {
    let w = world(kubeconfig(Auth::Token), false).await;
    assert_eq!(nodes_of(&w.check, w.aim.target()).await, Some(Readiness::Ready));

    let w = world(|api| api.token().to_owned(), false).await;
    let message = not_ready(nodes_of(&w.check, w.aim.target()).await.expect("nodes"));
    assert_eq!(message, format!("the secret {ARN} holds a token: the check must name its server"));
    let w = world(|api| api.token().to_owned(), true).await;
    assert_eq!(nodes_of(&w.check, w.aim.target()).await, Some(Readiness::Ready));
}

#[tokio::test]
async fn refused_credentials_are_not_ready_naming_the_secret_and_never_its_content() {
    let w = world(|_| "sha256~not-the-token".to_owned(), true).await;
    let message = not_ready(nodes_of(&w.check, w.aim.target()).await.expect("nodes"));
    assert!(message.contains(&format!("refused the credentials in {ARN} (401)")), "{message}");
    assert!(!message.contains("not-the-token"), "{message}");

    let w = world(kubeconfig(Auth::ClientCertificate), false).await;
    w.api.revoke(INFRA);
    let message = not_ready(w.check.check(w.aim.target()).await.expect("look"));
    assert!(message.contains("(401): Unauthorized"), "{message}");

    let w = world(|_| "clusters: [".to_owned(), false).await;
    let message = not_ready(w.check.check(w.aim.target()).await.expect("look"));
    assert!(message.starts_with(&format!("the secret {ARN} is neither a token nor a kubeconfig")), "{message}");
}

#[tokio::test]
async fn a_node_that_never_becomes_ready_and_operators_that_never_settle_or_flap_are_named() {
    let w = world(kubeconfig(Auth::Token), false).await;
    w.api.nodes_never(INFRA);
    w.api.never(INFRA);
    w.api.advance(LATE * 10);
    let message = not_ready(nodes_of(&w.check, w.aim.target()).await.expect("nodes"));
    assert!(message.starts_with("1 of 3 nodes are not Ready: ci-x7k2p-master-1 (Ready=False"), "{message}");
    assert!(matches!(w.check.check(w.aim.target()).await.expect("look"), Readiness::NotReady { .. }));
    w.api.flap(INFRA);
    let mut looks = Vec::new();
    for _ in 0..3 {
        looks.push(w.check.check(w.aim.target()).await.expect("look") == Readiness::Ready);
    }
    assert_eq!(looks, [true, false, true]);
}

#[tokio::test]
async fn lists_are_followed_page_by_page_and_a_plain_cluster_has_no_operators_to_wait_for() {
    let w = world(kubeconfig(Auth::Token), false).await;
    w.api.nodes(7);
    w.api.page(2);
    w.api.nodes_never(INFRA);
    let message = not_ready(nodes_of(&w.check, w.aim.target()).await.expect("nodes"));
    assert!(message.starts_with("1 of 7 nodes"), "every page is read: {message}");
    assert_eq!(w.api.take_log().len(), 5, "7 nodes in pages of 2, and the certificate requests (none)");

    w.api.plain(INFRA);
    assert_eq!(w.check.check(w.aim.target()).await.expect("look"), Readiness::Ready);
}

#[tokio::test]
async fn an_api_that_does_not_answer_is_unreachable() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("port").local_addr().expect("addr");
    let w = world(kubeconfig(Auth::Token), false).await;
    let mut aim = Aim::new(Platform::Fake(FakePlatform::default()));
    aim.cluster.outputs = w.aim.cluster.outputs.clone();
    aim.spec.readiness = w.aim.spec.readiness.clone();
    if let Some(k) = aim.spec.readiness.as_mut().and_then(|r| r.kubernetes.as_mut()) {
        k.server = Some(format!("https://{closed}/{{infraId}}"));
    }
    let Some(Readiness::Unreachable { message }) = nodes_of(&w.check, aim.target()).await else {
        panic!("a closed port is unreachable")
    };
    assert!(message.contains(&closed.to_string()), "{message}");
}

#[tokio::test]
async fn a_resume_waits_for_the_nodes_the_cluster_reports_through_the_pools_machinery() {
    let w = world(kubeconfig(Auth::ClientCertificate), false).await;
    w.api.nodes_after(LATE);
    let platforms = Platforms::new().with("fake", Arc::new(NoMachines)).with_readiness(Arc::new(w.check));
    let machinery = platforms.of(&w.aim.spec).expect("machinery");
    let nodes = machinery.nodes_ready(w.aim.target()).await.expect("look");
    assert!(matches!(&nodes, Nodes::NotReady(why) if why.starts_with("3 of 3 nodes are not Ready")), "{nodes:?}");
    w.api.advance(LATE);
    assert_eq!(machinery.nodes_ready(w.aim.target()).await.expect("look"), Nodes::Ready);
}

#[tokio::test]
async fn a_kubeconfig_is_not_read_for_a_pool_its_secret_is_not_tagged_for() {
    let w = world(kubeconfig(Auth::ClientCertificate), false).await;
    w.api.nodes_after(Duration::ZERO);
    refused_to_intruder(w.check.check(Target { pool: "intruder", ..w.aim.target() }).await, ARN);
}

/// A cluster installed and up (its nodes and operators looked at), then hibernated until its kubelets'
/// certificates expired: the first look of its resume, which began at `w`'s clock.
async fn installed_then_asleep_past_its_certificates(w: &mut World) {
    w.api.certificates_valid(Duration::from_secs(3600), Duration::from_secs(30 * 24 * 3600));
    assert_eq!(nodes_of(&w.check, w.aim.target()).await, Some(Readiness::Ready), "installed");
    w.api.advance(LATE);
    assert_eq!(w.check.check(w.aim.target()).await.expect("operators"), Readiness::Ready, "up");
    w.api.advance(Duration::from_secs(2 * 3600));
    w.aim.cluster.transition_started_at = Some(w.api.now());
    w.api.take_log();
}

#[tokio::test]
async fn a_resume_past_its_certificates_approves_the_kubelets_client_then_serving_requests_in_one_look() {
    let mut w = world(kubeconfig(Auth::ClientCertificate), false).await;
    installed_then_asleep_past_its_certificates(&mut w).await;
    let found = w.check.nodes(w.aim.target()).await.expect("look").expect("nodes");
    let message = not_ready(found.readiness);
    assert!(message.starts_with("3 of 3 nodes are not Ready: ci-x7k2p-master-0 (Ready=Unknown"), "{message}");
    let approved = &found.certificates.approved;
    assert_eq!(approved.len(), 6, "a client and a serving request per node: {approved:?}");
    assert!(approved[0].ends_with("(node ci-x7k2p-master-0's client certificate)"), "{approved:?}");
    assert!(approved[3].ends_with("(node ci-x7k2p-master-0's serving certificate)"), "{approved:?}");
    assert!(found.certificates.refused.is_empty());
    let csrs = w.api.csrs(INFRA);
    assert!(csrs.iter().all(|c| c.approved()), "every kubelet's request approved");
    let said = &csrs[0].object["status"]["conditions"][0];
    assert_eq!((said["reason"].as_str(), said["status"].as_str()), (Some("ApiaryApprove"), Some("True")));
    assert!(said["message"].as_str().is_some_and(|m| m.starts_with("Approved by Apiary")), "{said}");
    let log = w.api.take_log();
    let lists = log.iter().filter(|l| l.ends_with("certificatesigningrequests")).count();
    let machines = log.iter().filter(|l| l.ends_with("/machines")).count();
    let approvals = log.iter().filter(|l| l.starts_with("PUT ") && l.ends_with("/approval")).count();
    assert_eq!((lists, machines, approvals), (2, 1, 6), "{log:#?}");

    assert_eq!(nodes_of(&w.check, w.aim.target()).await, Some(Readiness::Ready), "Ready at the next look");
    assert_eq!(w.api.take_log(), ["GET /ci-x7k2p/api/v1/nodes"], "nothing more is listed once the nodes are Ready");
}

#[tokio::test]
async fn hostile_requests_stay_pending_each_named_with_the_rule_it_failed() {
    use apiary_fakeclouds::kubelets::Hostile;
    let mut w = world(kubeconfig(Auth::Token), false).await;
    w.api.hostile(&Hostile::ALL);
    installed_then_asleep_past_its_certificates(&mut w).await;
    let found = w.check.nodes(w.aim.target()).await.expect("look").expect("nodes");
    assert_eq!(found.certificates.approved.len(), 6, "the kubelets' own");
    let refused: Vec<&str> = found.certificates.refused.iter().map(|r| r.why.as_str()).collect();
    assert_eq!(refused.len(), 6, "{refused:#?}");
    for (why, says) in refused.iter().zip([
        "IP address 10.0.0.11 is not among Machine ci-x7k2p-machine-0's addresses",
        "a client certificate asked for by \"system:serviceaccount:default:intruder\", not the node bootstrapper",
        "no node ci-x7k2p-intruder in the cluster",
        "usages [\"client auth\", \"digital signature\"] are not a kubelet server's",
        "common name \"system:node:ci-x7k2p-master-1\" is not the requester \"system:node:ci-x7k2p-master-0\"",
    ]) {
        assert_eq!(*why, says);
    }
    // Node 0's own client request, but two hours older than the resume: on the cluster's clock, which is Apiary's.
    assert!(refused[5].starts_with("made at ") && refused[5].contains(", before this resume began at "), "{refused:?}");
    let pending: Vec<String> =
        w.api.csrs(INFRA).iter().filter(|c| !c.approved()).map(|c| c.name().to_owned()).collect();
    let named: Vec<String> = found.certificates.refused.iter().map(|r| r.name.clone()).collect();
    assert_eq!(pending, named, "exactly the hostile ones stay pending");
    assert_eq!(nodes_of(&w.check, w.aim.target()).await, Some(Readiness::Ready), "the kubelets' own were enough");
}

#[tokio::test]
async fn without_the_machine_api_or_with_approval_off_nothing_is_approved_and_the_message_says_why() {
    let mut w = world(kubeconfig(Auth::Token), false).await;
    installed_then_asleep_past_its_certificates(&mut w).await;
    let mut aim = Aim::new(Platform::Fake(FakePlatform::default()));
    aim.cluster.outputs = w.aim.cluster.outputs.clone();
    aim.spec.readiness = w.aim.spec.readiness.clone();
    if let Some(k) = aim.spec.readiness.as_mut().and_then(|r| r.kubernetes.as_mut()) {
        k.approve_node_certificates = Some(false);
    }
    let found = w.check.nodes(aim.target()).await.expect("look").expect("nodes");
    assert!(found.certificates.is_empty());
    assert!(w.api.take_log().iter().all(|l| l.ends_with("/nodes")), "approval off lists no request");
    assert!(w.api.csrs(INFRA).iter().all(|c| !c.approved()));

    // A plain Kubernetes cluster: no Machine API says which machine a node is.
    w.api.plain(INFRA);
    let found = w.check.nodes(w.aim.target()).await.expect("look").expect("nodes");
    assert!(found.certificates.is_empty());
    let message = not_ready(found.readiness);
    assert!(
        message.ends_with("the cluster has no Machine API: its nodes' certificate requests are left pending"),
        "{message}"
    );
    assert!(w.api.csrs(INFRA).iter().all(|c| !c.approved()));
}

#[tokio::test]
async fn a_resume_within_the_certificates_life_needs_no_request_and_renews_them() {
    let w = world(kubeconfig(Auth::Token), false).await;
    w.api.certificates_valid(Duration::from_secs(3600), Duration::from_secs(30 * 24 * 3600));
    assert_eq!(nodes_of(&w.check, w.aim.target()).await, Some(Readiness::Ready));
    w.api.advance(LATE);
    assert_eq!(w.check.check(w.aim.target()).await.expect("operators"), Readiness::Ready);
    w.api.advance(Duration::from_secs(3000)); // Past 80 % of their life: a look renews them.
    assert_eq!(nodes_of(&w.check, w.aim.target()).await, Some(Readiness::Ready), "resumed in time");
    assert_eq!(w.check.check(w.aim.target()).await.expect("operators"), Readiness::Ready);
    w.api.advance(Duration::from_secs(7200));
    assert_eq!(nodes_of(&w.check, w.aim.target()).await, Some(Readiness::Ready), "renewed for 30 days");
    assert!(w.api.csrs(INFRA).is_empty());
}
