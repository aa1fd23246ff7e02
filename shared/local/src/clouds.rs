//! The clouds reached over HTTP, for the local process: the power function's wiring (credentials from the
//! emulator's Secrets Manager), and the fake clouds `make run` and the system tests drive.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use apiary_aws::secrets::SecretsManager;
use apiary_aws::SdkConfig;
use apiary_clouds::Endpoints;
use apiary_fakeclouds::{azure, cluster_api, gcp, notifications, vsphere, webhook};
use apiary_ports::{Deps, Result};
use serde_json::Value;

/// `deps` with the clouds of `apiary-clouds` added to its platforms, as the power function's `main` does.
pub fn with_clouds(mut deps: Deps, sdk: &SdkConfig, endpoints: Endpoints) -> Result<Deps> {
    let secrets = Arc::new(SecretsManager::new(sdk));
    let policy = deps.config.url_policy.clone();
    deps.platforms = Arc::new(apiary_clouds::with_clouds(&deps.platforms, secrets, endpoints, policy)?);
    Ok(deps)
}

/// The GCP project the demo pools use.
pub const DEMO_PROJECT: &str = "apiary-demo";
/// The Azure subscription the demo pools use.
pub const DEMO_SUBSCRIPTION: &str = "00000000-0000-0000-0000-00000000a91a";
/// The Azure tenant of the demo's service principal.
pub const DEMO_TENANT: &str = "00000000-0000-0000-0000-0000000000d0";

/// The placeholder a pool file names the GCP service account's secret with.
pub const GCP_SECRET: &str = "{{fake-gcp-credentials}}";
/// The placeholder of the Azure service principal's secret.
pub const AZURE_SECRET: &str = "{{fake-azure-credentials}}";
/// The placeholder of the vCenter user's secret.
pub const VSPHERE_SECRET: &str = "{{fake-vsphere-credentials}}";
/// The placeholder of the installer's signing key.
pub const WEBHOOK_SECRET: &str = "{{fake-webhook-secret}}";
/// The placeholder of the clusters' API token (a Kubernetes readiness check's `credentials`).
pub const CLUSTER_API_SECRET: &str = "{{fake-cluster-api-token}}";
/// The placeholder of the notification receiver's signing key (a pool's `notify[].secret`).
pub const NOTIFY_SECRET: &str = "{{fake-notify-secret}}";
/// The placeholder of the reference OpenShift installer's signing key (its pools' pull secret and SSH key are
/// granted with it).
pub const OPENSHIFT_SECRET: &str = "{{openshift-installer-secret}}";
/// The demo's secrets, by the placeholder a pool file names them with.
pub const SECRETS: [&str; 7] =
    [GCP_SECRET, AZURE_SECRET, VSPHERE_SECRET, WEBHOOK_SECRET, CLUSTER_API_SECRET, NOTIFY_SECRET, OPENSHIFT_SECRET];

/// Which pools each demo secret is tagged for (`apiary:pools`), by its placeholder: a pool may use only the
/// secrets granted to it, as a team's pool may use only its team's credentials.
#[derive(Debug, Clone, Default)]
pub struct Grants(BTreeMap<&'static str, Vec<String>>);

impl Grants {
    /// Each secret granted to the pools whose spec (`(name, text)`) names its placeholder.
    pub fn named_by<'a>(pools: impl IntoIterator<Item = (&'a str, &'a str)>) -> Self {
        let mut grants = Self::default();
        for (pool, text) in pools {
            for secret in SECRETS.iter().filter(|s| text.contains(**s)) {
                grants.0.entry(secret).or_default().push(pool.to_owned());
            }
        }
        grants
    }

    /// Every secret granted to each of `pools`.
    pub fn every(pools: &[&str]) -> Self {
        Self(SECRETS.iter().map(|s| (*s, pools.iter().map(|p| (*p).to_owned()).collect())).collect())
    }

    fn of(&self, secret: &str) -> &[String] {
        self.0.get(secret).map(Vec::as_slice).unwrap_or_default()
    }
}

/// A fake Compute Engine, a fake Azure and a fake vCenter, each with a demo account whose credentials are stored
/// in Secrets Manager, the reference webhook installer on the fake Compute Engine, its key stored likewise, and
/// the clusters' API servers for readiness checks (each cluster ready a boot's time after its first look), and a
/// receiver of claim notifications, its key stored likewise.
pub struct DemoClouds {
    /// The fake Compute Engine, with the instance template `apiary-node`.
    pub gcp: gcp::FakeGcp,
    /// The fake Azure Resource Manager.
    pub azure: azure::FakeAzure,
    /// The fake vCenter (HTTPS, its CA in [`vsphere::FakeVsphere::ca_bundle`]), with the template `rhcos` and
    /// the folder `apiary`.
    pub vsphere: vsphere::FakeVsphere,
    /// The ARN of the service account's key: a GCP pool's `credentialsSecret`.
    pub gcp_credentials: String,
    /// The ARN of the service principal's secret: an Azure pool's `credentialsSecret`.
    pub azure_credentials: String,
    /// The ARN of the vCenter user: a vSphere pool's `credentialsSecret`.
    pub vsphere_credentials: String,
    /// The reference installer behind a webhook, installing on the fake Compute Engine (`europe-west1-b`).
    pub webhook: webhook::FakeWebhook,
    /// The ARN of its signing key: a pool's `provisioner.webhook.secret`.
    pub webhook_secret: String,
    /// The clusters' API servers, for readiness checks (HTTPS, its CA in [`cluster_api::FakeClusterApi::ca_bundle`]).
    /// Their kubelets' first certificates are valid [`FIRST_CERTIFICATES`]: a standby resumed later asks for new
    /// ones, as an OpenShift cluster hibernated in its first day does.
    pub cluster_api: cluster_api::FakeClusterApi,
    /// The ARN of the clusters' API token: a Kubernetes readiness check's `credentials`.
    pub cluster_api_credentials: String,
    /// The reference receiver of claim notifications (a pool's `notify` webhook), verifying each signature.
    pub receiver: notifications::FakeReceiver,
    /// The ARN of its signing key: a pool's `notify[].secret`.
    pub receiver_secret: String,
    /// The reference OpenShift installer, installing with the stand-in openshift-install on the emulator's EC2.
    pub openshift: crate::openshift::DemoOpenShift,
}

/// How long a demo cluster's first kubelet certificates are valid (OpenShift's are 24 hours).
pub const FIRST_CERTIFICATES: Duration = Duration::from_secs(60);

impl DemoClouds {
    /// Starts the three fakes (machines boot in `boot`, stop in `stop`) and the installer (installs take two
    /// boots), and stores their credentials under secrets named `<prefix>-fake-<cloud>` (`-fake-installer`), each
    /// tagged for the pools `grants` names.
    pub async fn start(
        sdk: &SdkConfig,
        prefix: &str,
        boot: Duration,
        stop: Duration,
        grants: &Grants,
    ) -> anyhow::Result<Self> {
        let secrets = SecretsManager::new(sdk);
        let gcp = gcp::FakeGcp::start(gcp::Timings { boot, stop }).await?;
        gcp.add_template("apiary-node");
        let key = gcp.service_account(&format!("apiary@{DEMO_PROJECT}.iam.gserviceaccount.com"), DEMO_PROJECT);
        let gcp_credentials = secrets.create(&format!("{prefix}-fake-gcp"), &key, grants.of(GCP_SECRET)).await?;
        let azure = azure::FakeAzure::start(azure::Timings { boot, stop, deploy: boot, delete: stop }).await?;
        let principal = azure.app(DEMO_TENANT, "apiary-demo");
        let azure_credentials =
            secrets.create(&format!("{prefix}-fake-azure"), &principal, grants.of(AZURE_SECRET)).await?;
        let vsphere =
            vsphere::FakeVsphere::start(vsphere::Timings { clone: boot, boot: boot / 2, shutdown: stop }).await?;
        vsphere.add_template("rhcos");
        vsphere.add_folder("apiary");
        let user = vsphere.user("apiary@vsphere.local");
        let vsphere_credentials =
            secrets.create(&format!("{prefix}-fake-vsphere"), &user, grants.of(VSPHERE_SECRET)).await?;
        let key = webhook::new_key();
        let webhook_secret =
            secrets.create(&format!("{prefix}-fake-installer"), &key, grants.of(WEBHOOK_SECRET)).await?;
        let cluster_api = cluster_api::FakeClusterApi::start(boot).await?;
        cluster_api.certificates_valid(FIRST_CERTIFICATES, Duration::from_secs(30 * 24 * 3600));
        let settings = webhook::Settings {
            gcp: gcp.clone(),
            project: DEMO_PROJECT.into(),
            zone: "europe-west1-b".into(),
            machines: 3,
            install_time: boot * 2,
            key,
            secrets_region: "us-east-1".into(),
            cluster_api: Some(cluster_api.clone()),
        };
        let webhook = webhook::FakeWebhook::start(settings).await?;
        let cluster_api_credentials = secrets
            .create(&format!("{prefix}-fake-cluster-api"), cluster_api.token(), grants.of(CLUSTER_API_SECRET))
            .await?;
        let key = webhook::new_key();
        let receiver = notifications::FakeReceiver::start(&key).await?;
        let receiver_secret = secrets.create(&format!("{prefix}-fake-notify"), &key, grants.of(NOTIFY_SECRET)).await?;
        let on_gcp = crate::openshift::DemoGcp {
            endpoint: gcp.endpoint(),
            credentials: gcp_credentials.clone(),
            pools: grants.of(GCP_SECRET),
        };
        let pools = grants.of(OPENSHIFT_SECRET);
        let openshift =
            crate::openshift::DemoOpenShift::start(sdk, prefix, boot * 2, &cluster_api, pools, &on_gcp).await?;
        Ok(Self {
            gcp,
            azure,
            vsphere,
            gcp_credentials,
            azure_credentials,
            vsphere_credentials,
            webhook,
            webhook_secret,
            cluster_api,
            cluster_api_credentials,
            receiver,
            receiver_secret,
            openshift,
        })
    }

    /// Where the power function reaches the fakes (vSphere pools name their vCenter themselves).
    pub fn endpoints(&self) -> Endpoints {
        Endpoints {
            gcp: Some(self.gcp.endpoint()),
            azure: Some(self.azure.endpoint()),
            azure_authority: Some(self.azure.authority()),
        }
    }

    /// Each `{{fake-…}}` placeholder a pool file may name, with what it stands for: the credentials' ARNs, the
    /// fake vCenter's `host:port` and its CA, the installer's URL and key, the clusters' API.
    pub fn values(&self) -> Vec<(&'static str, String)> {
        vec![
            (GCP_SECRET, self.gcp_credentials.clone()),
            (AZURE_SECRET, self.azure_credentials.clone()),
            (VSPHERE_SECRET, self.vsphere_credentials.clone()),
            ("{{fake-vsphere-server}}", self.vsphere.server()),
            ("{{fake-vsphere-ca}}", self.vsphere.ca_bundle()),
            ("{{fake-webhook-url}}", self.webhook.url()),
            (WEBHOOK_SECRET, self.webhook_secret.clone()),
            ("{{fake-cluster-api-url}}", self.cluster_api.url_template()),
            ("{{fake-cluster-api-server}}", self.cluster_api.server("{infraId}")),
            (CLUSTER_API_SECRET, self.cluster_api_credentials.clone()),
            ("{{fake-cluster-api-ca}}", self.cluster_api.ca_bundle()),
            ("{{fake-notify-url}}", self.receiver.url()),
            (NOTIFY_SECRET, self.receiver_secret.clone()),
            ("{{openshift-installer-url}}", self.openshift.url.clone()),
            (OPENSHIFT_SECRET, self.openshift.secret.clone()),
        ]
    }

    /// `spec` with every `{{fake-…}}` string replaced by what it names ([`DemoClouds::values`]).
    pub fn fill(&self, spec: &mut Value) {
        fill(spec, &self.values());
    }
}

/// `spec` with every string that is one of `values`' placeholders replaced by its value.
fn fill(spec: &mut Value, values: &[(&str, String)]) {
    match spec {
        Value::String(s) => {
            if let Some((_, v)) = values.iter().find(|(k, _)| k == s) {
                *s = v.clone();
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|v| fill(v, values)),
        Value::Object(map) => map.values_mut().for_each(|v| fill(v, values)),
        _ => {}
    }
}
