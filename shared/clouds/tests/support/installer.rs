//! A GCP pool whose clusters the reference webhook installer makes, for the webhook tests.

use std::sync::Arc;
use std::time::Duration;

use apiary_clouds::gcp::Gcp;
use apiary_clouds::http::Http;
use apiary_clouds::webhook::Webhook;
use apiary_fakeclouds::gcp::{FakeGcp, Timings};
use apiary_fakeclouds::webhook::{FakeWebhook, Settings};
use apiary_planner::power::Install;
use apiary_planner::{Cluster, GcpPlatform, Platform, PoolSpec, ProvisionerSpec, Timestamp, WebhookProvisioner};
use apiary_ports::platform::{Machinery, Platforms, Target};

use super::MemSecrets;

pub const PROJECT: &str = "ci-clusters-1";
pub const CLOUD_ARN: &str = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:apiary/gcp-AbCdEf";
pub const KEY_ARN: &str = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:apiary/installer-AbCdEf";
pub const KEY: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
pub const INSTALL: Duration = Duration::from_secs(600);

pub struct World {
    pub gcp: FakeGcp,
    pub receiver: FakeWebhook,
    pub machinery: Arc<dyn Machinery>,
    pub spec: PoolSpec,
    pub cluster: Cluster,
    pub now: Timestamp,
}

impl World {
    /// A GCP pool whose clusters the reference receiver installs; `key` is what the pool's secret holds.
    pub async fn new(key: &str) -> Self {
        let gcp = FakeGcp::start(Timings { boot: Duration::from_secs(60), stop: Duration::from_secs(30) })
            .await
            .expect("fake");
        let account = gcp.service_account("apiary@ci-clusters-1.iam.gserviceaccount.com", PROJECT);
        let settings = Settings {
            gcp: gcp.clone(),
            project: PROJECT.into(),
            zone: "europe-west1-b".into(),
            machines: 3,
            install_time: INSTALL,
            key: KEY.into(),
            secrets_region: "eu-west-1".into(),
            cluster_api: None,
        };
        let receiver = FakeWebhook::start(settings).await.expect("receiver");
        let secrets = Arc::new(MemSecrets(
            [(CLOUD_ARN.to_owned(), account), (KEY_ARN.to_owned(), key.to_owned())].into_iter().collect(),
        ));
        let http = Http::new(None).expect("client").with_budget(Duration::from_secs(5));
        let platforms = Platforms::new()
            .with("gcp", Arc::new(Gcp::new(http.clone(), secrets.clone(), Some(gcp.endpoint()))))
            .with_installer(Arc::new(Webhook::new(http, secrets)));
        let platform = GcpPlatform {
            project: PROJECT.into(),
            zone: Some("europe-west1-b".into()),
            zones: vec![],
            instance_template: "unused-the-installer-makes-the-machines".into(),
            machine_count: 3,
            credentials_secret: CLOUD_ARN.into(),
            labels: Default::default(),
        };
        let mut spec = PoolSpec::new(1, Platform::Gcp(platform));
        spec.base_domain = Some("ci.example.com".into());
        let webhook = Some(WebhookProvisioner { url: receiver.url(), secret: KEY_ARN.into() });
        spec.provisioner = Some(ProvisionerSpec { webhook });
        let machinery = platforms.of(&spec).expect("machinery");
        let now = chrono::Utc::now();
        Self { gcp, receiver, machinery, spec, cluster: Cluster::new("ci-abcde", "ci", "apiary-chose-this", now), now }
    }

    pub fn target(&self) -> Target<'_> {
        Target { pool: "gcp-ci", spec: &self.spec, cluster: &self.cluster, now: self.now }
    }

    /// Time passes for the machines, the installer and Apiary.
    pub fn later(&mut self, by: Duration) {
        self.gcp.advance(by);
        self.receiver.advance(by);
        self.now += chrono::TimeDelta::from_std(by).expect("duration");
    }

    pub async fn install_state(&self) -> Install {
        self.machinery.install_state(self.target()).await.expect("look")
    }
}
