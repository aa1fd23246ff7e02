//! The HTTPS readiness check against the fake cluster API: a cluster ready late, never, or flapping; the pool's CA
//! bundle trusted (and nothing else); an unreachable cluster; the URL template filled from the cluster.

use std::sync::Arc;
use std::time::Duration;

use crate::support::Aim;
use apiary_clouds::http::Http;
use apiary_clouds::readiness::HttpsReadiness;
use apiary_fakeclouds::cluster_api::FakeClusterApi;
use apiary_planner::power::Readiness;
use apiary_planner::{FakePlatform, HttpsProbe, Platform, ReadinessSpec};
use apiary_ports::platform::{Actuator, ReadinessCheck};

const LATE: Duration = Duration::from_secs(120);

async fn world(ca: bool) -> (FakeClusterApi, HttpsReadiness, Aim) {
    let api = FakeClusterApi::start(LATE).await.expect("fake");
    let check = HttpsReadiness::new(Http::new(None).expect("client"));
    let mut aim = Aim::new(Platform::Fake(FakePlatform::default()));
    let https = HttpsProbe { url: api.url_template(), ca_bundle: ca.then(|| api.ca_bundle()), expected_status: None };
    aim.spec.readiness = Some(ReadinessSpec { https: Some(https), kubernetes: None, settle_pause: None });
    (api, check, aim)
}

#[tokio::test]
async fn a_cluster_is_ready_once_its_api_says_so_and_not_before() {
    let (api, check, aim) = world(true).await;
    let Readiness::NotReady { message } = check.check(aim.target()).await.expect("look") else { panic!("ready early") };
    assert!(message.contains("503") && message.contains("etcd"), "what the cluster answered: {message}");
    api.advance(LATE);
    assert_eq!(check.check(aim.target()).await.expect("look"), Readiness::Ready);
    assert_eq!(api.take_log(), ["GET /ci-x7k2p/readyz", "GET /ci-x7k2p/readyz"], "one request per look");
}

#[tokio::test]
async fn a_cluster_that_never_becomes_ready_or_flaps_is_said_so_each_look() {
    let (api, check, aim) = world(true).await;
    api.never("ci-x7k2p");
    api.advance(LATE * 10);
    assert!(matches!(check.check(aim.target()).await.expect("look"), Readiness::NotReady { .. }));
    api.flap("ci-x7k2p");
    let looks = [
        check.check(aim.target()).await.expect("look") == Readiness::Ready,
        check.check(aim.target()).await.expect("look") == Readiness::Ready,
        check.check(aim.target()).await.expect("look") == Readiness::Ready,
    ];
    assert_eq!(looks, [true, false, true]);
}

#[tokio::test]
async fn only_the_pools_ca_is_trusted_and_an_unreachable_cluster_is_said_so() {
    let (_, check, aim) = world(false).await;
    let Readiness::Unreachable { message } = check.check(aim.target()).await.expect("look") else {
        panic!("a certificate from an unknown CA was trusted")
    };
    assert!(message.to_lowercase().contains("certificate"), "{message}");

    let (_, check, mut aim) = world(true).await;
    let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("port").local_addr().expect("addr");
    if let Some(https) = aim.spec.readiness.as_mut().and_then(|r| r.https.as_mut()) {
        https.url = format!("https://{closed}/{{infraId}}/readyz");
    }
    assert!(matches!(check.check(aim.target()).await.expect("look"), Readiness::Unreachable { .. }));
}

#[test]
fn the_url_is_filled_from_the_cluster_and_a_missing_value_is_named() {
    let mut aim = Aim::new(Platform::Fake(FakePlatform::default()));
    let url = |template: &str, aim: &Aim| {
        let probe = HttpsProbe { url: template.into(), ca_bundle: None, expected_status: None };
        probe.url_for(&aim.cluster, Some("ci.example.com"))
    };
    let t = "https://api.{clusterName}.{baseDomain}:6443/{infraId}/readyz";
    assert_eq!(url(t, &aim).as_deref(), Ok("https://api.ci.ci.example.com:6443/ci-x7k2p/readyz"));
    assert!(url("{outputs.apiUrl}/readyz", &aim).expect_err("missing").contains("outputs.apiUrl"));
    aim.cluster.outputs.insert("apiUrl".into(), "https://api.x.example.com:6443".into());
    assert_eq!(url("{outputs.apiUrl}/readyz", &aim).as_deref(), Ok("https://api.x.example.com:6443/readyz"));
}

#[tokio::test]
async fn a_pool_with_readiness_gets_the_check_through_its_machinery() {
    let (api, check, aim) = world(true).await;
    assert!(matches!(check.check(aim.target()).await.expect("look"), Readiness::NotReady { .. }));
    api.advance(LATE);
    let platforms = apiary_ports::platform::Platforms::new().with("fake", Arc::new(NoMachines));
    assert!(platforms.of(&aim.spec).is_err(), "a deployment without the check says so");
    let platforms = platforms.with_readiness(Arc::new(check));
    let machinery = platforms.of(&aim.spec).expect("machinery");
    assert_eq!(machinery.cluster_ready(aim.target()).await.expect("look"), Readiness::Ready);
}

/// A platform whose machines all run and pass their checks, as far as it is asked (it is asked nothing else).
pub(crate) struct NoMachines;

#[async_trait::async_trait]
impl Actuator for NoMachines {
    async fn machines_running(
        &self,
        _: apiary_ports::platform::Target<'_>,
    ) -> apiary_ports::Result<apiary_ports::platform::Machines> {
        unreachable!("not asked")
    }
    async fn machines_stopped(
        &self,
        _: apiary_ports::platform::Target<'_>,
    ) -> apiary_ports::Result<apiary_ports::platform::Machines> {
        unreachable!("not asked")
    }
    async fn nodes_ready(
        &self,
        _: apiary_ports::platform::Target<'_>,
    ) -> apiary_ports::Result<apiary_ports::platform::Nodes> {
        Ok(apiary_ports::platform::Nodes::Ready)
    }
    async fn machine_addresses(
        &self,
        _: apiary_ports::platform::Target<'_>,
    ) -> apiary_ports::Result<Vec<apiary_planner::Machine>> {
        unreachable!("not asked")
    }
    async fn start_machines(
        &self,
        _: apiary_ports::platform::Target<'_>,
    ) -> apiary_ports::Result<apiary_ports::platform::Refused> {
        unreachable!("not asked")
    }
    async fn stop_machines(
        &self,
        _: apiary_ports::platform::Target<'_>,
    ) -> apiary_ports::Result<apiary_ports::platform::Refused> {
        unreachable!("not asked")
    }
}

#[async_trait::async_trait]
impl apiary_ports::platform::Provisioner for NoMachines {
    async fn install_state(
        &self,
        _: apiary_ports::platform::Target<'_>,
    ) -> apiary_ports::Result<apiary_planner::power::Install> {
        unreachable!("not asked")
    }
    async fn provision(
        &self,
        _: apiary_ports::platform::Target<'_>,
    ) -> apiary_ports::Result<apiary_ports::platform::Provision> {
        unreachable!("not asked")
    }
    async fn deprovision(
        &self,
        _: apiary_ports::platform::Target<'_>,
    ) -> apiary_ports::Result<apiary_planner::power::Termination> {
        unreachable!("not asked")
    }
}
