//! `make run`'s OpenShift pools: the reference installer (`apiary-installer`) served on 127.0.0.1, its jobs run as
//! local processes of `openshift-install` — the stand-in `fake-openshift-install` built beside this program, or a
//! real one named by `APIARY_OPENSHIFT_INSTALL` — its records and install directories under a directory of its
//! own, and the clusters' credentials in the emulator's Secrets Manager.
//!
//! The stand-in launches each cluster's machines in the emulator's EC2 (tagged for its infraId, as the installer
//! tags them, so the pool's AWS platform powers them), and writes a kubeconfig that reaches the demo's fake
//! cluster API, so the pool's Kubernetes readiness check and its approval of node certificates run against it.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use apiary_aws::secrets::SecretsManager;
use apiary_aws::SdkConfig;
use apiary_clouds::secrets::SecretCache;
use apiary_fakeclouds::cluster_api::FakeClusterApi;
use apiary_installer::aws::SecretsVault;
use apiary_installer::local::{LocalDirs, LocalJobs, LocalPools, LocalRecords};
use apiary_installer::model::PoolSettings;
use apiary_installer::service::Installer;

/// The demo pools' install-config template.
pub const TEMPLATE: &str = include_str!("../../../infra/demo-openshift-install-config.yaml");
/// The name the installer keeps it under, which the demo pool names (`installConfigTemplate`).
pub const TEMPLATE_NAME: &str = "demo-aws";
/// The GCP pool's template, kept as [`GCP_TEMPLATE_NAME`].
pub const GCP_TEMPLATE: &str = include_str!("../../../infra/demo-openshift-gcp-install-config.yaml");
/// The name the GCP pool names it by.
pub const GCP_TEMPLATE_NAME: &str = "demo-gcp";

/// The fake Compute Engine the demo's GCP OpenShift pools install on: its API, the ARN of the demo account's key,
/// and the pools that key is granted to (their jobs install with it).
pub struct DemoGcp<'a> {
    /// The Compute API (`CLOUDSDK_API_ENDPOINT_OVERRIDES_COMPUTE` for the jobs).
    pub endpoint: String,
    /// The ARN of the service account key.
    pub credentials: String,
    /// The pools it is granted to.
    pub pools: &'a [String],
}
/// The extra manifest the demo pools' clusters are installed with.
pub const MANIFEST: &str = include_str!("../../../infra/demo-openshift-manifest.yaml");
/// The release the demo pools name (the stand-in installs no release; a real openshift-install would).
pub const RELEASE: &str = "quay.io/openshift-release-dev/ocp-release:4.18.1-x86_64";
/// A pull secret in the registry's format (it reaches no registry), its password a canary
/// ([`apiary_fakeclouds::canary`]).
fn pull_secret() -> String {
    use base64::Engine;
    let auth = format!("demo:{}", apiary_fakeclouds::canary::secret("pull-secret"));
    let auth = base64::engine::general_purpose::STANDARD.encode(auth);
    serde_json::json!({"auths": {"quay.io": {"auth": auth, "email": "demo@example.com"}}}).to_string()
}

/// The SSH key the demo clusters' machines would accept.
const SSH_KEY: &str = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIDemoKeyForApiaryMakeRunOnly demo@example.com";

/// The reference installer of the demo.
pub struct DemoOpenShift {
    /// Its URL: a pool's `provisioner.webhook.url`.
    pub url: String,
    /// The ARN of its signing key: a pool's `provisioner.webhook.secret`.
    pub secret: String,
    /// Where it keeps its settings, records, install directories and jobs' output.
    pub root: PathBuf,
    /// A file of the stand-in's faults (`bootstrap`, `hang`, `destroy-again`), read at each job.
    pub faults: PathBuf,
}

impl DemoOpenShift {
    /// Starts the installer for `pools`, with the demo template kept as [`TEMPLATE_NAME`], the pull secret and SSH key stored as
    /// secrets `<prefix>-openshift-*` tagged for them; installs take `install` (and their clusters' API is
    /// `cluster_api`).
    pub async fn start(
        sdk: &SdkConfig,
        prefix: &str,
        install: Duration,
        cluster_api: &FakeClusterApi,
        pools: &[String],
        gcp: &DemoGcp<'_>,
    ) -> anyhow::Result<Self> {
        let root = std::env::temp_dir().join(format!("{prefix}-openshift-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(&root).with_context(|| format!("creating {}", root.display()))?;
        let secrets = SecretsManager::new(sdk);
        let key = apiary_fakeclouds::webhook::new_key();
        let secret = secrets.create(&format!("{prefix}-openshift-installer"), &key, pools).await?;
        let pull_secret = secrets.create(&format!("{prefix}-openshift-pull-secret"), &pull_secret(), pools).await?;
        let ssh_key = secrets.create(&format!("{prefix}-openshift-ssh-key"), SSH_KEY, pools).await?;
        // The template is kept apart, under the name the demo pool gives it (`installConfigTemplate`).
        let settings = PoolSettings {
            release_image: RELEASE.into(),
            install_config: String::new(),
            pull_secret,
            ssh_key: Some(ssh_key),
            manifests: vec![MANIFEST.into()],
            credentials: None,
            install_timeout: Some("20m".into()),
            role_arn: None,
        };
        let local_pools = LocalPools::new(&root);
        local_pools.put_template(TEMPLATE_NAME, TEMPLATE).await?;
        local_pools.put_template(GCP_TEMPLATE_NAME, GCP_TEMPLATE).await?;
        for pool in pools {
            // A pool granted the GCP key installs with it, should it name a GCP template.
            let credentials = gcp.pools.contains(pool).then(|| gcp.credentials.clone());
            local_pools.put(pool, &PoolSettings { credentials, ..settings.clone() }).await?;
        }
        let api = root.join("cluster-api.json");
        let url = cluster_api.server("");
        let described = serde_json::json!({
            "url": url.trim_end_matches('/'), "caPem": cluster_api.ca_bundle(), "token": cluster_api.token(),
        });
        std::fs::write(&api, described.to_string())?;
        let faults = root.join("faults");
        std::fs::write(&faults, "")?;
        let env = vec![
            ("FAKE_OPENSHIFT_INSTALL_SECONDS".to_owned(), install.as_secs_f64().to_string()),
            ("FAKE_OPENSHIFT_INSTALL_CLUSTER_API".to_owned(), api.display().to_string()),
            ("FAKE_OPENSHIFT_INSTALL_FAULTS_FILE".to_owned(), faults.display().to_string()),
            ("CLOUDSDK_API_ENDPOINT_OVERRIDES_COMPUTE".to_owned(), format!("{}/", gcp.endpoint)),
        ];
        let jobs = LocalJobs::new(vec![program().display().to_string()], &root, env);
        let reader: Arc<dyn apiary_ports::secrets::Secrets> = Arc::new(secrets);
        let installer = Installer {
            pools: Arc::new(local_pools),
            records: Arc::new(LocalRecords::new(&root)),
            replays: Arc::new(apiary_installer::local::LocalReplays::new(&root)),
            dirs: Arc::new(LocalDirs::new(&root)),
            jobs: Arc::new(jobs),
            vault: Arc::new(SecretsVault::new(sdk)),
            secrets: Arc::new(SecretCache::new(reader)),
            keys: vec![key],
            clock: Arc::new(apiary_ports::clock::SystemClock),
        };
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await?;
        let url = format!("http://{}/apiary", listener.local_addr()?);
        tokio::spawn(apiary_installer::serve::serve(listener, installer));
        Ok(Self { url, secret, root, faults })
    }
}

/// The `openshift-install` the jobs run: `APIARY_OPENSHIFT_INSTALL`, else the stand-in built beside this program
/// (or, for a test's binary, one directory up). Without either, each install fails saying so.
pub fn program() -> PathBuf {
    if let Some(named) = std::env::var_os("APIARY_OPENSHIFT_INSTALL") {
        return PathBuf::from(named);
    }
    let exe = std::env::current_exe().unwrap_or_default();
    let beside = |dir: Option<&Path>| dir.map(|d| d.join("fake-openshift-install")).filter(|p| p.exists());
    let dir = exe.parent();
    beside(dir).or_else(|| beside(dir.and_then(Path::parent))).unwrap_or_else(|| {
        tracing::warn!(
            "no fake-openshift-install beside {}: OpenShift demo installs fail until it is built (cargo build -p \
             apiary-installer --bin fake-openshift-install) or APIARY_OPENSHIFT_INSTALL names one",
            exe.display()
        );
        PathBuf::from("fake-openshift-install")
    })
}
