//! The reference installer end to end on one machine: signed requests of Apiary's contract, install-configs
//! rendered and checked, jobs run as processes of the stand-in `fake-openshift-install`, the install directory on
//! disk and the cluster's credentials stored as secrets tagged for the pool, and the kubeconfig the install wrote
//! passing Apiary's own Kubernetes readiness check against the fake cluster API.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use apiary_clouds::http::Http;
use apiary_clouds::kubernetes::KubernetesReadiness;
use apiary_clouds::secrets::SecretCache;
use apiary_fakeclouds::cluster_api::FakeClusterApi;
use apiary_installer::local::{LocalDirs, LocalJobs, LocalPools, LocalRecords, LocalReplays};
use apiary_installer::memory::MemorySecrets;
use apiary_installer::model::PoolSettings;
use apiary_installer::ports::{JobKind, JobSpec, JobState, Jobs};
use apiary_installer::service::Installer;
use apiary_planner::power::Readiness;
use apiary_planner::{Cluster, FakePlatform, KubernetesCheck, Platform, PoolSpec, ReadinessSpec};
use apiary_ports::platform::{ReadinessCheck, Target};
use bytes::Bytes;
use serde_json::{json, Value};

mod common;

/// The installer's signing key: a canary (`apiary_fakeclouds::canary`), as every secret of the tests is.
const KEY: &str = "whsec_YXBpYXJ5LWNhbmFyeS1zaWduaW5nLWtleS01ZjFkMGMzYTllN2IyNDY4";
/// A key that is not the installer's.
const OTHER_KEY: &str = "whsec_YXBpYXJ5LWNhbmFyeS1zaWduaW5nLWtleS0wYjdlNDFjOWQyYTZmMzg1";
const POOL: &str = "ocp";
const PULL: &str = r#"{"auths":{"quay.io":{"auth":"Y2k6YXBpYXJ5LWNhbmFyeS1wdWxsLXNlY3JldC1jNGU5YTdkMmIxZjA4MzU2","email":"ci@example.com"}}}"#;

const TEMPLATE: &str = "\
apiVersion: v1
metadata:
  name: {clusterName}
baseDomain: {baseDomain}
controlPlane:
  name: master
  replicas: 3
compute:
- name: worker
  replicas: {parameters.workers}
networking:
  machineNetwork:
  - cidr: {parameters.machineCidr}
platform:
  none: {}
";

struct World {
    installer: Installer,
    secrets: Arc<MemorySecrets>,
    root: PathBuf,
    api: FakeClusterApi,
    faults: PathBuf,
}

async fn world(name: &str, template: &str) -> World {
    world_with(name, template, vec![]).await
}

/// A world whose jobs also have `env` (a fake cloud's endpoint).
async fn world_with(name: &str, template: &str, env: Vec<(String, String)>) -> World {
    let root = std::env::temp_dir().join(format!("apiary-installer-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(&root).expect("root");
    let api = FakeClusterApi::start(Duration::ZERO).await.expect("the fake cluster API");
    let api_file = root.join("cluster-api.json");
    let url = api.server("");
    let described = json!({"url": url.trim_end_matches('/'), "caPem": api.ca_bundle(), "token": api.token()});
    std::fs::write(&api_file, described.to_string()).expect("api file");
    let faults = root.join("faults");
    std::fs::write(&faults, "").expect("faults");

    let secrets = Arc::new(MemorySecrets::default());
    let pull = secrets.add("ocp/pull-secret", PULL, &[POOL]);
    let ssh = secrets.add("ocp/ssh-key", "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJ ci@example.com", &[POOL]);
    let pools = LocalPools::new(&root);
    let settings = PoolSettings {
        release_image: "quay.io/openshift-release-dev/ocp-release:4.18.1-x86_64".into(),
        install_config: template.into(),
        pull_secret: pull,
        ssh_key: Some(ssh),
        manifests: Vec::new(),
        credentials: None,
        install_timeout: None,
        role_arn: None,
    };
    pools.put(POOL, &settings).await.expect("settings");
    let jobs = LocalJobs::new(
        vec![env!("CARGO_BIN_EXE_fake-openshift-install").to_owned()],
        &root,
        vec![
            ("FAKE_OPENSHIFT_INSTALL_SECONDS".into(), "0.3".into()),
            ("FAKE_OPENSHIFT_INSTALL_CLUSTER_API".into(), api_file.display().to_string()),
            ("FAKE_OPENSHIFT_INSTALL_FAULTS_FILE".into(), faults.display().to_string()),
        ]
        .into_iter()
        .chain(env)
        .collect(),
    );
    let installer = Installer {
        pools: Arc::new(pools),
        records: Arc::new(LocalRecords::new(&root)),
        replays: Arc::new(LocalReplays::new(&root)),
        dirs: Arc::new(LocalDirs::new(&root)),
        jobs: Arc::new(jobs),
        vault: secrets.clone(),
        secrets: Arc::new(SecretCache::new(secrets.clone())),
        keys: vec![KEY.to_owned()],
        clock: Arc::new(apiary_ports::clock::SystemClock),
    };
    World { installer, secrets, root, api, faults }
}

/// A world's job output is kept for the scan for leaked secrets however its test ended.
impl Drop for World {
    fn drop(&mut self) {
        let name = self.root.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        apiary_fakeclouds::canary::keep_files("jobs", &name, &self.root.join("jobs"));
    }
}

impl World {
    async fn call(&self, method: &str, path: &str, body: Value) -> (u16, Value) {
        common::answer(&self.installer, common::signed(KEY, method, path, &body)).await
    }

    async fn put(&self, id: &str, attempt: u32, parameters: &[(&str, &str)]) -> (u16, Value) {
        let parameters: BTreeMap<&str, &str> = parameters.iter().copied().collect();
        let body = json!({
            "pool": POOL, "clusterId": id, "clusterName": id, "baseDomain": "ci.example.com",
            "labels": {"team": "ci"}, "parameters": parameters, "attempt": attempt,
        });
        self.call("PUT", &format!("/clusters/{id}"), body).await
    }

    /// Looks (or asks again) until the answer is no longer `while_state`.
    async fn until_not(&self, method: &str, id: &str, while_state: &str) -> (u16, Value) {
        for _ in 0..300 {
            let (status, body) = self.call(method, &format!("/clusters/{id}"), Value::Null).await;
            if body["state"] != while_state {
                return (status, body);
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("cluster {id} stayed {while_state}");
    }

    /// Gives the pool `manifests`.
    async fn manifests(&self, manifests: &[&str]) {
        let pools = LocalPools::new(&self.root);
        let mut settings = apiary_installer::ports::Pools::settings(&pools, POOL).await.expect("read").expect("some");
        settings.manifests = manifests.iter().map(|m| (*m).to_owned()).collect();
        pools.put(POOL, &settings).await.expect("settings");
    }

    /// The files openshift-install consumed from `manifests/` and `openshift/` for cluster `id`.
    fn consumed_manifests(&self, id: &str) -> Vec<String> {
        let state = std::fs::read(self.root.join(format!("clusters/{id}/.openshift_install_state.json")));
        let state: Value = serde_json::from_slice(&state.expect("state")).expect("json");
        let files = state["*manifests.Openshift"]["FileList"].as_array().cloned().unwrap_or_default();
        files.iter().filter_map(|f| f.as_str().map(str::to_owned)).collect()
    }

    fn faults(&self, list: &str) {
        std::fs::write(&self.faults, list).expect("faults");
    }

    /// Waits until job `job`'s output says `text`.
    async fn until_logged(&self, job: &str, text: &str) {
        for _ in 0..300 {
            if std::fs::read_to_string(self.root.join("jobs").join(job)).is_ok_and(|out| out.contains(text)) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("job {job} never said {text:?}");
    }

    fn jobs_run(&self) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(self.root.join("jobs"))
            .map(|d| d.filter_map(|e| e.ok()).map(|e| e.file_name().to_string_lossy().into_owned()).collect())
            .unwrap_or_default();
        names.sort();
        names
    }
}

const PARAMETERS: [(&str, &str); 2] = [("workers", "2"), ("machineCidr", "10.0.0.0/16")];

#[tokio::test]
async fn a_cluster_installs_passes_the_readiness_check_through_its_kubeconfig_and_is_destroyed() {
    let w = world("ready", TEMPLATE).await;
    let (status, body) = w.put("ci-1", 1, &PARAMETERS).await;
    assert_eq!((status, body["state"].as_str()), (202, Some("Provisioning")), "{body}");
    let (status, body) = w.until_not("GET", "ci-1", "Provisioning").await;
    assert_eq!((status, body["state"].as_str()), (200, Some("Ready")), "{body}");
    let infra_id = body["infraId"].as_str().expect("infraId").to_owned();
    assert!(infra_id.starts_with("ci-1-") && infra_id.len() == 10, "{infra_id}");
    let outputs = &body["outputs"];
    assert_eq!(outputs["apiUrl"], json!(w.api.server(&infra_id)));
    assert_eq!(outputs["consoleUrl"], "https://console-openshift-console.apps.ci-1.ci.example.com");

    // The install-config the job got: rendered, with the pull secret and key from their secrets.
    let state = std::fs::read(w.root.join("clusters/ci-1/.openshift_install_state.json")).expect("state");
    let state: Value = serde_json::from_slice(&state).expect("json");
    let config = &state["*installconfig.InstallConfig"];
    assert_eq!(
        (config["compute"][0]["replicas"].as_i64(), config["metadata"]["name"].as_str()),
        (Some(2), Some("ci-1"))
    );
    assert_eq!(config["networking"]["machineNetwork"][0]["cidr"], "10.0.0.0/16");
    assert_eq!(config["pullSecret"], PULL);
    let pull = std::fs::read_to_string(w.root.join("clusters/ci-1/.apiary/pull-secret.json")).expect("pull secret");
    assert_eq!(pull, PULL, "kept for the job to read the release image with");

    // Its credentials are secrets tagged for the pool, and the kubeconfig reaches the cluster.
    let kubeconfig_arn = outputs["kubeconfigSecretArn"].as_str().expect("kubeconfig ARN").to_owned();
    let password_arn = outputs["kubeadminPasswordSecretArn"].as_str().expect("password ARN").to_owned();
    let password = w.secrets.value(&password_arn).unwrap_or_default();
    assert!(password.starts_with("apiary-canary-kubeadmin-password-"), "{password}");
    // openshift-install prints the password; the job's output has it redacted, the install directory's log keeps it.
    let output = std::fs::read_to_string(w.root.join("jobs/ci-1.install.1.out")).expect("the job's output");
    assert!(output.contains("Install complete!") && output.contains("password: (redacted)"), "{output}");
    assert!(!output.contains(&password), "{output}");
    let log = std::fs::read_to_string(w.root.join("clusters/ci-1/.openshift_install.log")).expect("the full log");
    assert!(log.contains(&password), "{log}");
    let now = chrono::Utc::now();
    let mut cluster = Cluster::new("ci-1", POOL, &infra_id, now);
    cluster.outputs = outputs
        .as_object()
        .expect("outputs")
        .iter()
        .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_owned()))
        .collect();
    let mut spec = PoolSpec::new(1, Platform::Fake(FakePlatform::default()));
    let kubernetes = KubernetesCheck {
        credentials: "{outputs.kubeconfigSecretArn}".into(),
        server: None,
        ca_bundle: None,
        approve_node_certificates: None,
    };
    spec.readiness = Some(ReadinessSpec { https: None, kubernetes: Some(kubernetes), settle_pause: None });
    let check = KubernetesReadiness::new(Http::new(None).expect("client"), w.secrets.clone());
    let target = Target { pool: POOL, spec: &spec, cluster: &cluster, now };
    assert_eq!(check.check(target).await.expect("look"), Readiness::Ready);

    // The reaper's look.
    let (status, body) = w.call("GET", "/clusters?pool=ocp", Value::Null).await;
    assert_eq!((status, body), (200, json!({"clusters": [{"id": "ci-1", "state": "Ready"}]})));

    // Removal: a destroy from the kept metadata, then nothing of the cluster is left.
    let (status, body) = w.call("DELETE", "/clusters/ci-1", Value::Null).await;
    assert_eq!((status, body["state"].as_str()), (202, Some("Deprovisioning")), "{body}");
    let (status, _) = w.until_not("DELETE", "ci-1", "Deprovisioning").await;
    assert_eq!(status, 404);
    assert!(w.secrets.value(&kubeconfig_arn).is_none() && w.secrets.value(&password_arn).is_none());
    assert!(!w.root.join("clusters/ci-1").exists(), "the install directory is removed");
    assert_eq!(w.jobs_run(), ["ci-1.destroy.2.out", "ci-1.install.1.out"]);
    let (_, body) = w.call("GET", "/clusters?pool=ocp", Value::Null).await;
    assert_eq!(body, json!({"clusters": []}));
}

#[tokio::test]
async fn a_template_that_does_not_fit_the_installers_schema_is_refused_naming_the_field() {
    let w = world("refused", &TEMPLATE.replace("  none: {}", "  aws:\n    regoin: us-east-1")).await;
    let (status, body) = w.put("ci-2", 1, &PARAMETERS).await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["state"], "Failed");
    let message = body["message"].as_str().expect("message");
    assert!(
        message.contains("platform.aws.regoin: is not a field") && message.contains("platform.aws.region: is required"),
        "{message}"
    );
    // Nothing was started or kept, and the pull secret was never read into an answer.
    assert!(w.jobs_run().is_empty() && !message.contains("auths"));
    let (status, _) = w.call("GET", "/clusters/ci-2", Value::Null).await;
    assert_eq!(status, 404);

    // A parameter the entry lacks, and one YAML would read as structure, are named too (each a later attempt: a
    // request id is taken for one request only).
    let (status, body) = w.put("ci-2", 2, &[("workers", "2")]).await;
    assert_eq!(status, 400);
    assert!(body["message"].as_str().is_some_and(|m| m.contains("parameters.machineCidr")), "{body}");
    let (_, body) = w.put("ci-2", 3, &[("workers", "2\nsshKey: mine"), ("machineCidr", "10.0.0.0/16")]).await;
    assert!(body["message"].as_str().is_some_and(|m| m.contains("parameters.workers")), "{body}");
}

#[tokio::test]
async fn a_failed_install_is_cleaned_up_and_told_with_the_logs_excerpt_then_the_next_attempt_installs() {
    let w = world("failed", TEMPLATE).await;
    w.faults("bootstrap");
    let (status, _) = w.put("ci-3", 1, &PARAMETERS).await;
    assert_eq!(status, 202);
    let (status, body) = w.until_not("GET", "ci-3", "Provisioning").await;
    assert_eq!((status, body["state"].as_str(), body["attempt"].as_u64()), (409, Some("Failed"), Some(1)), "{body}");
    let message = body["message"].as_str().expect("message");
    assert!(
        message.starts_with(
            "attempt 1: openshift-install create cluster exited with status 5: Bootstrap failed to complete"
        ),
        "{message}"
    );
    // The clean-up destroy ran before the attempt was told failed.
    assert_eq!(w.jobs_run(), ["ci-3.destroy.2.out", "ci-3.install.1.out"]);

    w.faults("");
    let (status, _) = w.put("ci-3", 2, &PARAMETERS).await;
    assert_eq!(status, 202);
    let (status, body) = w.until_not("GET", "ci-3", "Provisioning").await;
    assert_eq!((status, body["attempt"].as_u64()), (200, Some(2)), "{body}");
}

/// Issue 73: the pool's release, carried by the install request, is the one installed: over the settings' release,
/// and a release that is not an image reference is refused naming it.
#[tokio::test]
async fn the_release_the_request_names_is_installed_instead_of_the_settings() {
    let w = world("release", TEMPLATE).await;
    let release = "quay.io/openshift-release-dev/ocp-release:4.18.2-x86_64";
    let body = json!({
        "pool": POOL, "clusterId": "ci-21", "clusterName": "ci-21", "baseDomain": "ci.example.com",
        "parameters": {"workers": "2", "machineCidr": "10.0.0.0/16"}, "attempt": 1, "release": release,
    });
    let (status, _) = w.call("PUT", "/clusters/ci-21", body.clone()).await;
    assert_eq!(status, 202);
    let (status, answer) = w.until_not("GET", "ci-21", "Provisioning").await;
    assert_eq!(status, 200, "{answer}");
    let state = std::fs::read(w.root.join("clusters/ci-21/.openshift_install_state.json")).expect("state");
    let state: Value = serde_json::from_slice(&state).expect("json");
    assert_eq!(state["*releaseimage.Image"]["PullSpec"], release, "the request's release, not the settings'");

    let mut bad = body;
    bad["clusterId"] = json!("ci-22");
    bad["clusterName"] = json!("ci-22");
    bad["release"] = json!("4.18.2");
    let (status, answer) = w.call("PUT", "/clusters/ci-22", bad).await;
    assert_eq!(status, 400, "{answer}");
    let message = answer["message"].as_str().unwrap_or_default();
    assert!(message.starts_with("release: \"4.18.2\" is not an image reference"), "{message}");
}

const CONFIGMAP: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: team-{labels.team}\n  namespace: \
                         openshift-config\ndata:\n  cluster: {clusterName}\n";
const MACHINECONFIG: &str = "apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfig\nmetadata:\n  \
                             name: 99-worker-chrony\nspec:\n  config:\n    ignition:\n      version: 3.2.0\n";

const GCP_TEMPLATE: &str = "\
apiVersion: v1
metadata:
  name: {clusterName}
baseDomain: {baseDomain}
controlPlane:
  name: master
  replicas: 3
  platform:
    gcp:
      type: n2-standard-4
      zones: [europe-west1-c]
compute:
- name: worker
  replicas: 2
  platform:
    gcp:
      type: n2-standard-4
      zones: [europe-west1-c]
platform:
  gcp:
    projectID: ocp-ci
    region: europe-west1
    userLabels:
    - key: team
      value: {labels.team}
";

/// Gives the pool the cloud credentials `arn`.
async fn credentials(w: &World, arn: Option<String>) {
    let pools = LocalPools::new(&w.root);
    let mut settings = apiary_installer::ports::Pools::settings(&pools, POOL).await.expect("read").expect("some");
    settings.credentials = arn;
    pools.put(POOL, &settings).await.expect("settings");
}

/// Issue 73: on GCP openshift-install's jobs take the pool's service account key from a secret tagged for the pool.
/// The install makes its machines on the (fake) Compute Engine with that key, labelled for its infraId as the
/// pool's GCP platform finds them; the destroy removes them with it; the key is never left in the install directory
/// nor beside it once the job is done. A pool whose credentials are missing, not its own or not a key is refused
/// before any job, naming `credentials`.
#[tokio::test]
async fn on_gcp_the_jobs_install_and_destroy_with_the_pools_service_account_key() {
    use apiary_fakeclouds::gcp::{FakeGcp, Timings};
    let gcp = FakeGcp::start(Timings { boot: Duration::from_millis(100), stop: Duration::from_millis(100) })
        .await
        .expect("the fake Compute Engine");
    let env = vec![("CLOUDSDK_API_ENDPOINT_OVERRIDES_COMPUTE".to_owned(), format!("{}/", gcp.endpoint()))];
    let w = world_with("gcp", GCP_TEMPLATE, env).await;
    let key = gcp.service_account("openshift-install@ocp-ci.iam.gserviceaccount.com", "ocp-ci");
    let arn = w.secrets.add("ocp/gcp-key", &key, &[POOL]);
    let others = w.secrets.add("other/gcp-key", &key, &["other"]);

    // Refused before any job: no credentials, another pool's, not a key.
    for (id, named, said) in [
        (
            "ci-51",
            None,
            "credentials: a gcp install needs the cloud's credentials: name their secret in pools/ocp.json",
        ),
        ("ci-52", Some(others), "credentials: "),
        ("ci-53", Some(w.secrets.add("ocp/not-a-key", "{}", &[POOL])), "credentials: secret "),
    ] {
        credentials(&w, named).await;
        let (status, body) = w.put(id, 1, &[]).await;
        assert_eq!(status, 400, "{id}: {body}");
        let message = body["message"].as_str().unwrap_or_default();
        assert!(message.starts_with(said), "{id}: {message}");
    }
    assert!(w.jobs_run().is_empty(), "{:?}", w.jobs_run());

    credentials(&w, Some(arn)).await;
    let (status, body) = w.put("ci-54", 1, &[]).await;
    assert_eq!(status, 202, "{body}");
    let (status, body) = w.until_not("GET", "ci-54", "Provisioning").await;
    assert_eq!(status, 200, "{body}");
    let infra = body["infraId"].as_str().expect("infraId").to_owned();
    let label = apiary_clouds::gcp::cluster_label(&infra);
    assert_eq!(gcp.labelled("ocp-ci", &label, "owned").len(), 5, "three control-plane machines and two workers");
    let machine = gcp.instances("ocp-ci").into_iter().find(|(_, n, _)| n.starts_with(&infra)).expect("a machine");
    assert_eq!(gcp.labels("ocp-ci", "europe-west1-c", &machine.1).get("team").map(String::as_str), Some("ci"));
    let left = |w: &World| {
        let dir = w.root.join("clusters/ci-54/.apiary/gcp-credentials.json").exists();
        let own = std::fs::read_dir(w.root.join("credentials")).map(|d| d.count()).unwrap_or(0);
        (dir, own)
    };
    assert_eq!(left(&w), (false, 0), "the key is not kept once the job is done");

    let (status, _) = w.call("DELETE", "/clusters/ci-54", Value::Null).await;
    assert_eq!(status, 202);
    let (status, _) = w.until_not("DELETE", "ci-54", "Deprovisioning").await;
    assert_eq!(status, 404);
    let gone = gcp.labelled("ocp-ci", &label, "owned");
    assert!(gone.iter().all(|s| s == "STOPPING"), "the destroy deleted every machine with the key: {gone:?}");
    assert_eq!(left(&w), (false, 0));
}

/// Issue 73: on Azure the jobs take the pool's service principal as openshift-install reads it
/// (`AZURE_AUTH_LOCATION`); one missing a field is refused before any job, naming the fields, never a value.
#[tokio::test]
async fn on_azure_the_jobs_take_the_pools_service_principal() {
    let template = TEMPLATE.replace("  none: {}", "  azure:\n    region: westeurope");
    let w = world("azure", &template).await;
    let principal = json!({"subscriptionId": "00000000-0000-0000-0000-0000000000aa", "tenantId": "00000000-0000-0000-0000-0000000000bb",
                           "clientId": "ocp-installer", "clientSecret": "apiary-canary-azure-client-secret-ocp-1"});
    let mut partial = principal.clone();
    partial.as_object_mut().map(|p| p.remove("tenantId"));
    credentials(&w, Some(w.secrets.add("ocp/azure-partial", &partial.to_string(), &[POOL]))).await;
    let (status, body) = w.put("ci-61", 1, &PARAMETERS).await;
    assert_eq!(status, 400, "{body}");
    let message = body["message"].as_str().unwrap_or_default();
    assert!(message.starts_with("credentials: secret ") && message.ends_with("tenantId missing"), "{message}");
    assert!(!message.contains("apiary-canary"), "{message}");

    credentials(&w, Some(w.secrets.add("ocp/azure", &principal.to_string(), &[POOL]))).await;
    let (status, _) = w.put("ci-62", 1, &PARAMETERS).await;
    assert_eq!(status, 202);
    let (status, body) = w.until_not("GET", "ci-62", "Provisioning").await;
    assert_eq!(status, 200, "the stand-in found the principal where openshift-install reads it: {body}");
    let (status, _) = w.call("DELETE", "/clusters/ci-62", Value::Null).await;
    assert_eq!(status, 202);
    let (status, _) = w.until_not("DELETE", "ci-62", "Deprovisioning").await;
    assert_eq!(status, 404, "the destroy had it too");
}

/// Issue 73: a pool names its install-config template by reference. The installer renders the template kept under
/// that name (over its settings' own), checks a pinned one's content against the pin, and refuses a name it does
/// not keep, a name that is not one (a path), and a pool with no template at all, each naming the field.
#[tokio::test]
async fn the_template_a_pool_names_is_rendered_and_a_pinned_one_must_be_its_content() {
    let w = world("named-template", TEMPLATE).await;
    let large = TEMPLATE.replace("replicas: 3", "replicas: 5");
    LocalPools::new(&w.root).put_template("ocp-large", &large).await.expect("the template");
    let digest = {
        use sha2::Digest;
        sha2::Sha256::digest(large.as_bytes()).iter().map(|b| format!("{b:02x}")).collect::<String>()
    };
    let request = |id: &str, reference: &str| {
        json!({
            "pool": POOL, "clusterId": id, "clusterName": id, "baseDomain": "ci.example.com",
            "parameters": {"workers": "2", "machineCidr": "10.0.0.0/16"}, "attempt": 1,
            "installConfigTemplate": reference,
        })
    };
    let installed = |id: &str| {
        let state = std::fs::read(w.root.join(format!("clusters/{id}/.openshift_install_state.json"))).expect("state");
        let state: Value = serde_json::from_slice(&state).expect("json");
        state["*installconfig.InstallConfig"]["controlPlane"]["replicas"].as_i64()
    };
    for (id, reference) in [("ci-41", "ocp-large".to_owned()), ("ci-42", format!("ocp-large@sha256:{digest}"))] {
        let (status, body) = w.call("PUT", &format!("/clusters/{id}"), request(id, &reference)).await;
        assert_eq!(status, 202, "{body}");
        let (status, body) = w.until_not("GET", id, "Provisioning").await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(installed(id), Some(5), "{id}: the named template, not the settings'");
    }

    let w = &w;
    let refused = |id: &'static str, reference: String| {
        let body = request(id, &reference);
        async move {
            let (status, answer) = w.call("PUT", &format!("/clusters/{id}"), body).await;
            assert_eq!(status, 400, "{answer}");
            answer["message"].as_str().unwrap_or_default().to_owned()
        }
    };
    let changed = refused("ci-43", format!("ocp-large@sha256:{}", "0".repeat(64))).await;
    assert!(
        changed.starts_with(&format!("installConfigTemplate: templates/ocp-large.yaml is sha256:{digest}")),
        "{changed}"
    );
    let missing = refused("ci-44", "ocp-small".into()).await;
    assert_eq!(
        missing,
        "installConfigTemplate: the installer keeps no template \"ocp-small\" (templates/ocp-small.yaml)"
    );
    for (id, path) in [("ci-45", "../pools/ocp"), ("ci-47", "/etc/passwd"), ("ci-48", "ocp-large/../x")] {
        let why = refused(id, path.into()).await;
        assert!(
            why.starts_with("installConfigTemplate:") && why.contains("not a template's reference"),
            "{path}: {why}"
        );
    }
    let started = w.jobs_run();
    assert!(["ci-43", "ci-44", "ci-45", "ci-47", "ci-48"].iter().all(|id| !started.iter().any(|j| j.starts_with(id))));

    // Settings with no template of their own serve only pools that name one.
    let pools = LocalPools::new(&w.root);
    let mut settings = apiary_installer::ports::Pools::settings(&pools, POOL).await.expect("read").expect("some");
    settings.install_config = String::new();
    pools.put(POOL, &settings).await.expect("settings");
    let (status, answer) = w.put("ci-46", 1, &PARAMETERS).await;
    assert_eq!(status, 400, "{answer}");
    assert_eq!(
        answer["message"],
        "installConfig: pools/ocp.json has no template, and the pool names none (installConfigTemplate)"
    );
}

/// Issue 73: a pool's manifests are rendered for the cluster and reach openshift-install's `openshift/` after
/// `create manifests` and before `create cluster`, on a first attempt and on one that replaces an abandoned one; a
/// bad one is refused naming it before any job.
#[tokio::test]
async fn a_pools_manifests_are_installed_with_the_cluster_and_a_bad_one_is_refused_first() {
    let w = world("manifests", TEMPLATE).await;
    w.manifests(&[CONFIGMAP, MACHINECONFIG]).await;
    let (status, _) = w.put("ci-31", 1, &PARAMETERS).await;
    assert_eq!(status, 202);
    let (status, body) = w.until_not("GET", "ci-31", "Provisioning").await;
    assert_eq!(status, 200, "{body}");
    let consumed = w.consumed_manifests("ci-31");
    for file in
        ["openshift/99_apiary-00-configmap-team-ci.yaml", "openshift/99_apiary-01-machineconfig-99-worker-chrony.yaml"]
    {
        assert!(consumed.contains(&file.to_owned()), "{file} in {consumed:?}");
    }
    // openshift-install's own manifests were made first, and kept beside the pool's.
    assert!(consumed.contains(&"openshift/openshift-install-manifests.yaml".to_owned()), "{consumed:?}");
    let out = std::fs::read_to_string(w.root.join("jobs/ci-31.install.1.out")).expect("the job's output");
    let (made, installed) = (out.find("Manifests created in"), out.find("Install complete!"));
    assert!(made.is_some() && made < installed, "{out}");

    // An attempt that replaces one still installing takes the manifests across its clean-up.
    w.faults("hang");
    w.put("ci-32", 1, &PARAMETERS).await;
    w.until_logged("ci-32.install.1.out", "bootstrapping").await;
    w.faults("");
    w.put("ci-32", 2, &PARAMETERS).await;
    let (status, body) = w.until_not("GET", "ci-32", "Provisioning").await;
    assert_eq!((status, body["attempt"].as_u64()), (200, Some(2)), "{body}");
    assert!(w.consumed_manifests("ci-32").contains(&"openshift/99_apiary-00-configmap-team-ci.yaml".to_owned()));

    // A manifest without a kind is refused naming the pool's settings, the manifest and the field; nothing runs.
    w.manifests(&[CONFIGMAP, "apiVersion: v1\nmetadata:\n  name: x\n"]).await;
    let before = w.jobs_run();
    let (status, body) = w.put("ci-33", 1, &PARAMETERS).await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["message"], "pools/ocp.json: manifests[1]: kind: is required");
    assert_eq!(w.jobs_run(), before);
}

#[tokio::test]
async fn a_failure_for_quota_is_told_in_words_the_planner_classifies_as_quota() {
    let w = world("quota", TEMPLATE).await;
    w.faults("quota");
    let (status, _) = w.put("ci-20", 1, &PARAMETERS).await;
    assert_eq!(status, 202);
    let (status, body) = w.until_not("GET", "ci-20", "Provisioning").await;
    assert_eq!((status, body["state"].as_str()), (409, Some("Failed")), "{body}");
    let message = body["message"].as_str().expect("message");
    assert!(message.contains("error(MissingQuota): ec2/L-1216C47A is not available in us-east-1"), "{message}");
    assert_eq!(apiary_planner::failure::classify(message), apiary_planner::failure::FailureReason::Quota);
}

#[tokio::test]
async fn a_destroy_that_fails_is_run_again_until_the_cluster_is_gone() {
    let w = world("destroy", TEMPLATE).await;
    w.faults("destroy-again");
    w.put("ci-4", 1, &PARAMETERS).await;
    assert_eq!(w.until_not("GET", "ci-4", "Provisioning").await.0, 200);
    w.call("DELETE", "/clusters/ci-4", Value::Null).await;
    let mut told = None;
    for _ in 0..300 {
        let (status, body) = w.call("DELETE", "/clusters/ci-4", Value::Null).await;
        if status == 404 {
            break;
        }
        told = told.or(body["message"].as_str().map(str::to_owned));
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let told = told.expect("the failed destroy is told");
    assert!(told.contains("DependencyViolation") && told.ends_with("it runs again"), "{told}");
    assert_eq!(w.jobs_run(), ["ci-4.destroy.2.out", "ci-4.destroy.3.out", "ci-4.install.1.out"]);
}

#[tokio::test]
async fn a_removal_during_the_install_stops_it_and_a_new_attempt_replaces_an_abandoned_one() {
    let w = world("stopped", TEMPLATE).await;
    w.faults("hang");
    w.put("ci-5", 1, &PARAMETERS).await;
    // Apiary gave up on attempt 1 (its install timeout): attempt 2 stops it, destroys what it made, installs.
    w.until_logged("ci-5.install.1.out", "bootstrapping").await;
    w.faults("");
    let (status, body) = w.put("ci-5", 2, &PARAMETERS).await;
    assert_eq!((status, body["state"].as_str()), (202, Some("Provisioning")), "{body}");
    let (status, body) = w.until_not("GET", "ci-5", "Provisioning").await;
    assert_eq!((status, body["attempt"].as_u64()), (200, Some(2)), "{body}");
    assert_eq!(w.jobs_run(), ["ci-5.destroy.2.out", "ci-5.install.1.out", "ci-5.install.3.out"]);

    w.faults("hang");
    w.put("ci-6", 1, &PARAMETERS).await;
    w.until_logged("ci-6.install.1.out", "bootstrapping").await;
    let (status, _) = w.call("DELETE", "/clusters/ci-6", Value::Null).await;
    assert_eq!(status, 202);
    let (status, _) = w.until_not("DELETE", "ci-6", "Deprovisioning").await;
    assert_eq!(status, 404);
    assert!(w.jobs_run().contains(&"ci-6.destroy.2.out".to_owned()));
}

#[tokio::test]
async fn requests_not_signed_with_the_installers_key_are_refused() {
    let w = world("unsigned", TEMPLATE).await;
    let req = http::Request::builder().method("GET").uri("/apiary/clusters/ci-1").body(Bytes::new()).expect("request");
    assert_eq!(w.installer.handle(req).await.status().as_u16(), 401);
    // A signed request naming no cluster a directory may be made for.
    let (status, body) = w.call("GET", "/clusters/..", Value::Null).await;
    assert_eq!(status, 400, "{body}");
    // An installer that holds another key refuses what this one signs.
    let other = Installer { keys: vec![OTHER_KEY.into()], ..w.installer.clone() };
    let (status, body) = common::answer(&other, common::signed(KEY, "GET", "/clusters/ci-1", &Value::Null)).await;
    assert_eq!(status, 401, "{body}");
}

#[tokio::test]
async fn a_job_past_its_timeout_is_stopped_and_failed() {
    let root = std::env::temp_dir().join(format!("apiary-installer-timeout-{}", std::process::id()));
    let jobs = LocalJobs::new(
        vec![env!("CARGO_BIN_EXE_fake-openshift-install").to_owned()],
        &root,
        vec![
            ("FAKE_OPENSHIFT_INSTALL_FAULTS".into(), "hang".into()),
            ("FAKE_OPENSHIFT_INSTALL_SECONDS".into(), "0".into()),
        ],
    );
    std::fs::create_dir_all(root.join("clusters/ci-7")).expect("dir");
    std::fs::write(
        root.join("clusters/ci-7/install-config.yaml"),
        TEMPLATE
            .replace("{clusterName}", "ci-7")
            .replace("{baseDomain}", "x.example.com")
            .replace("{parameters.workers}", "1")
            .replace("{parameters.machineCidr}", "10.0.0.0/16")
            + "pullSecret: '{\"auths\":{}}'\n",
    )
    .expect("config");
    let spec = JobSpec {
        kind: JobKind::Install,
        cluster: "ci-7".into(),
        pool: POOL.into(),
        run: 1,
        release_image: "quay.io/x/y:1".into(),
        timeout: Duration::from_secs(1),
        role_arn: None,
    };
    let job = jobs.start(&spec).await.expect("started");
    assert_eq!(jobs.state(&job).await.expect("state"), JobState::Running);
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert_eq!(jobs.state(&job).await.expect("state"), JobState::Failed("create cluster timed out after 1s".into()));
    assert!(std::fs::read_to_string(root.join("clusters/ci-7/.openshift_install.log"))
        .is_ok_and(|l| l.contains("bootstrapping")));
}

#[tokio::test]
async fn make_runs_openshift_pool_installs_every_inventory_entry_with_its_template() {
    let infra = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../infra");
    let template = std::fs::read_to_string(infra.join("demo-openshift-install-config.yaml")).expect("template");
    let pool: Value =
        serde_json::from_slice(&std::fs::read(infra.join("demo-pool-openshift.json")).expect("pool")).expect("json");
    let labels: BTreeMap<String, String> = serde_json::from_value(pool["labels"].clone()).expect("labels");
    let domain = pool["baseDomain"].as_str().expect("baseDomain");
    let entries = pool["inventory"]["clusterDeployments"].as_array().expect("entries");
    assert!(!entries.is_empty());
    let schema = apiary_installer::schema::Schema::installer().expect("schema");
    for entry in entries {
        let parameters: BTreeMap<String, String> = serde_json::from_value(entry["parameters"].clone()).expect("params");
        let name = entry["name"].as_str().expect("name");
        let values = apiary_installer::template::Values {
            cluster_name: name,
            base_domain: Some(domain),
            labels: &labels,
            parameters: &parameters,
        };
        let text = apiary_installer::template::render(&template, &values).expect("renders");
        let mut doc: Value = serde_saphyr::from_str(&text).expect("YAML");
        doc["pullSecret"] = json!(PULL);
        assert_eq!(schema.check(&doc, 8), [], "{name}");
        assert_eq!(doc["metadata"]["name"], name);
    }
}

/// The pool's name from the signed body becomes a file path and a key (`pools/<pool>.json`, the secrets' names): a
/// name that is not a pool's, by the planner's own rule, is refused naming the field, and nothing is read or kept.
#[tokio::test]
async fn a_pool_name_that_is_not_one_is_refused_before_it_becomes_a_path() {
    let w = world("names", TEMPLATE).await;
    std::fs::write(w.root.join("secret.json"), r#"{"releaseImage": "x", "installConfig": "y"}"#).expect("planted");
    for (attempt, pool) in (1..).zip(["../secret", "ocp/../../secret", "OCP", "", "ocp\n"]) {
        let body = json!({
            "pool": pool, "clusterId": "ci-9", "clusterName": "ci-9", "baseDomain": "ci.example.com",
            "parameters": {"workers": "2", "machineCidr": "10.0.0.0/16"}, "attempt": attempt,
        });
        let (status, body) = w.call("PUT", "/clusters/ci-9", body).await;
        assert_eq!(status, 400, "{pool:?}: {body}");
        let message = body["message"].as_str().unwrap_or_default();
        assert!(message.starts_with("pool: "), "{pool:?}: {message}");
        assert!(!message.contains("secret.json") && !message.contains("releaseImage"), "{message}");
    }
    let (status, body) = w.call("GET", "/clusters?pool=../secret", Value::Null).await;
    assert_eq!(status, 400, "{body}");
    assert!(w.jobs_run().is_empty());
    let (status, _) = w.call("GET", "/clusters/ci-9", Value::Null).await;
    assert_eq!(status, 404, "nothing kept");
}

/// The request `req` would be with another method and path, its headers (and so its signature) kept: what a replay
/// of a seen request as another one is.
fn resent(req: http::Request<bytes::Bytes>, method: &str, path: &str) -> http::Request<bytes::Bytes> {
    let (mut parts, body) = req.into_parts();
    parts.method = method.parse().expect("method");
    parts.uri = format!("https://installer.example.com/apiary{path}").parse().expect("uri");
    http::Request::from_parts(parts, body)
}

/// A signature covers the `webhook-id`, the timestamp and the body, not the method or the path: the id must name
/// them, and an id is not taken twice for two requests. Each hostile request is refused `401` with nothing done.
#[tokio::test]
async fn a_signed_request_is_taken_only_for_what_its_id_names_and_only_once() {
    let w = world("bound", TEMPLATE).await;
    let put = |id: &str, attempt: u32, team: &str| {
        json!({"pool": POOL, "clusterId": id, "clusterName": id, "baseDomain": "ci.example.com",
               "labels": {"team": team}, "parameters": {"workers": "2", "machineCidr": "10.0.0.0/16"},
               "attempt": attempt})
    };
    for id in ["ci-1", "ci-2"] {
        assert_eq!(w.put(id, 1, &PARAMETERS).await.0, 202);
        assert_eq!(w.until_not("GET", id, "Provisioning").await.0, 200);
    }
    let answer = |req| common::answer(&w.installer, req);
    let look = || common::signed(KEY, "GET", "/clusters/ci-1", &Value::Null);

    // A look, seen once, sent as the removal of the same cluster or another, or as a look at another.
    for (method, path) in [("DELETE", "/clusters/ci-1"), ("DELETE", "/clusters/ci-2"), ("GET", "/clusters/ci-2")] {
        let (status, body) = answer(resent(look(), method, path)).await;
        assert_eq!(status, 401, "{method} {path}: {body}");
        assert!(body["message"].as_str().is_some_and(|m| m.contains("does not name this request")), "{body}");
    }
    // An install's id with another attempt in its body, or made for another cluster.
    let now = chrono::Utc::now().timestamp();
    let (status, _) =
        answer(common::signed_as(KEY, "PUT", "/clusters/ci-3", &put("ci-3", 2, "ci"), "ci-3.PutCluster.1", now)).await;
    assert_eq!(status, 401, "another attempt");
    let (status, _) =
        answer(common::signed_as(KEY, "PUT", "/clusters/ci-3", &put("ci-3", 1, "ci"), "ci-1.PutCluster.1", now)).await;
    assert_eq!(status, 401, "another cluster's id");
    // The same id twice for two requests: the second is a replay.
    let first = common::signed_as(KEY, "PUT", "/clusters/ci-3", &put("ci-3", 1, "ci"), "ci-3.PutCluster.1", now);
    assert_eq!(answer(first).await.0, 202);
    let again = common::signed_as(KEY, "PUT", "/clusters/ci-3", &put("ci-3", 1, "ci"), "ci-3.PutCluster.1", now + 1);
    assert_ne!(answer(again).await.0, 401, "the same request again is Apiary's retry");
    let other = common::signed_as(KEY, "PUT", "/clusters/ci-3", &put("ci-3", 1, "intruder"), "ci-3.PutCluster.1", now);
    let (status, body) = answer(other).await;
    assert_eq!(status, 401, "{body}");
    assert!(body["message"].as_str().is_some_and(|m| m.contains("a replay")), "{body}");
    // Stale and future timestamps, another key, a list's id for another pool. The margins past the five minutes
    // allowed are wide enough that the seconds this test takes cannot bring a future timestamp back within them.
    for at in [now - 301, now + 360] {
        let (status, _) =
            answer(common::signed_as(KEY, "GET", "/clusters/ci-1", &Value::Null, "ci-1.GetCluster.1", at)).await;
        assert_eq!(status, 401, "signed at {at}, now {now}");
    }
    assert_eq!(answer(common::signed(OTHER_KEY, "DELETE", "/clusters/ci-1", &Value::Null)).await.0, 401);
    let list = common::signed_as(KEY, "GET", "/clusters?pool=ocp", &Value::Null, &format!("ocp.list.{now}"), now);
    assert_eq!(answer(resent(list, "GET", "/clusters?pool=other")).await.0, 401);

    // Nothing was done: both clusters stand, with the jobs they had.
    for id in ["ci-1", "ci-2"] {
        let (status, body) = w.call("GET", &format!("/clusters/{id}"), Value::Null).await;
        assert_eq!((status, body["state"].as_str()), (200, Some("Ready")), "{id}: {body}");
    }
    assert!(w.jobs_run().iter().all(|j| j.contains(".install.")), "{:?}", w.jobs_run());
}

/// A removal is final: while the destroy runs no attempt installs (a delayed retry of a higher attempt used to
/// clear the install directory, the destroy's metadata.json with it, and install again), and once the cluster is
/// gone a delayed install request for an attempt the removal covered is refused; the id stays gone.
#[tokio::test]
async fn a_removal_is_final_whatever_install_request_comes_late() {
    let w = world("final", TEMPLATE).await;
    assert_eq!(w.put("ci-5", 1, &PARAMETERS).await.0, 202);
    assert_eq!(w.until_not("GET", "ci-5", "Provisioning").await.0, 200);
    let (status, body) = w.call("DELETE", "/clusters/ci-5", Value::Null).await;
    assert_eq!((status, body["state"].as_str()), (202, Some("Deprovisioning")), "{body}");
    let (status, body) = w.put("ci-5", 2, &PARAMETERS).await;
    assert_eq!(status, 400, "{body}");
    assert!(body["message"].as_str().is_some_and(|m| m.contains("being removed")), "{body}");
    assert_eq!(w.until_not("DELETE", "ci-5", "Deprovisioning").await.0, 404);

    let (status, body) = w.put("ci-5", 1, &PARAMETERS).await;
    assert_eq!(status, 400, "{body}");
    assert!(body["message"].as_str().is_some_and(|m| m.contains("was removed at attempt 1")), "{body}");
    assert_eq!(w.call("GET", "/clusters/ci-5", Value::Null).await.0, 404);
    assert_eq!(w.call("DELETE", "/clusters/ci-5", Value::Null).await.0, 404);
    assert_eq!(w.call("GET", "/clusters?pool=ocp", Value::Null).await.1, json!({"clusters": []}));
    assert_eq!(w.jobs_run(), ["ci-5.destroy.2.out", "ci-5.install.1.out"], "no install after the removal");
    assert!(!w.root.join("clusters/ci-5").exists());
}

/// The local runner starts one process a job, however many looks ask for it at once.
#[tokio::test]
async fn a_job_asked_for_twice_at_once_runs_once() {
    let root = std::env::temp_dir().join(format!("apiary-installer-once-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(&root).expect("root");
    let counter = root.join("started");
    let script = "echo started >> \"$COUNTER\"; sleep 0.3";
    let jobs = LocalJobs::new(
        vec!["sh".into(), "-c".into(), script.into(), "sh".into()],
        &root,
        vec![("COUNTER".into(), counter.display().to_string())],
    );
    let spec = JobSpec {
        kind: JobKind::Install,
        cluster: "ci-8".into(),
        pool: POOL.into(),
        run: 1,
        release_image: "quay.io/x/y:1".into(),
        timeout: Duration::from_secs(5),
        role_arn: None,
    };
    let (a, b) = tokio::join!(jobs.start(&spec), jobs.start(&spec));
    assert_eq!(a.expect("started"), b.expect("started"));
    let again = jobs.start(&spec).await.expect("started");
    for _ in 0..100 {
        if jobs.state(&again).await.expect("state") != JobState::Running {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(jobs.state(&again).await.expect("state"), JobState::Succeeded);
    assert_eq!(std::fs::read_to_string(&counter).expect("counter").lines().count(), 1, "one process");
}
