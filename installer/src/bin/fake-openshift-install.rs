//! A stand-in for `openshift-install`, for `make run` and the installer's tests: the real command's arguments, the
//! real files, its time taken, and the ways the real one fails.
//!
//! ```text
//! fake-openshift-install create manifests --dir DIR [--log-level LEVEL]
//! fake-openshift-install create cluster --dir DIR [--log-level LEVEL]
//! fake-openshift-install destroy cluster --dir DIR [--log-level LEVEL]
//! fake-openshift-install version
//! ```
//!
//! `create manifests` consumes `DIR/install-config.yaml` as `create cluster` does and writes some of the cluster's
//! manifests into `manifests/` and `openshift/`. `create cluster` reads and consumes `DIR/install-config.yaml`
//! (or goes on from `create manifests`), refusing one openshift-install refuses (exit 3), consumes the manifests
//! (listing each file under `*manifests.Openshift` in `.openshift_install_state.json`; one that is not YAML exits 3),
//! writes `metadata.json` in the installer's format (its infraID the name and five random characters),
//! `auth/kubeconfig`, `auth/kubeadmin-password` and `.openshift_install.log`, and on AWS launches the cluster's
//! machines, tagged `kubernetes.io/cluster/<infraID>=owned` and with `platform.aws.userTags` as the installer tags them (through whatever endpoint
//! the AWS SDK is given). `destroy cluster` terminates them from `metadata.json`.
//!
//! The environment shapes it:
//! - `FAKE_OPENSHIFT_INSTALL_SECONDS`: how long an install takes (10; a destroy a fifth of it).
//! - `FAKE_OPENSHIFT_INSTALL_CLUSTER_API`: a JSON file `{url, caPem, token}` naming a fake cluster API: the
//!   kubeconfig's server is `<url>/<infraID>`, its CA and token these.
//! - `FAKE_OPENSHIFT_INSTALL_FAULTS`: `bootstrap` (the install fails waiting for bootstrap, exit 5, its machines
//!   left for a destroy), `quota` (the installer's quota check refuses it before anything is made, exit 4, with
//!   openshift-install's MissingQuota line), `hang` (it never finishes), `destroy-again` (each cluster's first
//!   destroy fails, exit 1, and must be run again).
//! - `FAKE_OPENSHIFT_INSTALL_FAULTS_FILE`: a file holding more of them, read at each run (a demo or a test changes
//!   it between runs).
//! - `FAKE_OPENSHIFT_INSTALL_AMI`: the image machines launch from (default the install-config's `amiID`).
//!
//! On GCP it makes the machines as openshift-install does, one `instances.insert` each, labelled
//! `kubernetes-io-cluster-<infraID>=owned`, with the service account key `GOOGLE_APPLICATION_CREDENTIALS` names,
//! through gcloud's `CLOUDSDK_API_ENDPOINT_OVERRIDES_COMPUTE` (a fake Compute Engine); `destroy cluster` deletes
//! them. On Azure it reads the service principal `AZURE_AUTH_LOCATION` names, failing as openshift-install does
//! without one, and makes no machines.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use base64::Engine;
use serde_json::{json, Value};

/// openshift-install's exit status for an install-config it refuses.
const EXIT_INSTALL_CONFIG: u8 = 3;
/// Its exit status when the infrastructure could not be made.
const EXIT_INFRASTRUCTURE: u8 = 4;
/// Its exit status when bootstrapping fails.
const EXIT_BOOTSTRAP: u8 = 5;

struct Log {
    file: Option<std::fs::File>,
}

impl Log {
    fn open(dir: &Path) -> Self {
        let file = std::fs::OpenOptions::new().create(true).append(true).open(dir.join(".openshift_install.log")).ok();
        Self { file }
    }

    fn line(&mut self, level: &str, msg: &str) {
        let time = chrono::Utc::now().format("%Y-%m-%dT%H:%M:%SZ");
        let quoted = serde_json::to_string(msg).unwrap_or_default();
        let line = format!("time=\"{time}\" level={level} msg={quoted}\n");
        if let Some(file) = &mut self.file {
            let _ = file.write_all(line.as_bytes());
        }
        let _ = std::io::stderr().write_all(line.as_bytes());
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let dir = args
        .iter()
        .position(|a| a == "--dir")
        .and_then(|i| args.get(i + 1).cloned())
        .or_else(|| args.iter().find_map(|a| a.strip_prefix("--dir=").map(str::to_owned)))
        .unwrap_or_else(|| ".".to_owned());
    let dir = PathBuf::from(dir);
    let verb: Vec<&str> = args.iter().map(String::as_str).filter(|a| !a.starts_with("--")).take(2).collect();
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("level=fatal msg=\"no runtime: {e}\"");
            return ExitCode::FAILURE;
        }
    };
    match verb.as_slice() {
        ["version", ..] => {
            let image = std::env::var("OPENSHIFT_INSTALL_RELEASE_IMAGE_OVERRIDE").unwrap_or_default();
            let said = format!("fake-openshift-install 4.18.0\nrelease image {image}\n");
            let _ = std::io::stdout().write_all(said.as_bytes());
            ExitCode::SUCCESS
        }
        ["create", "manifests"] => create_manifests(&dir),
        ["create", "cluster"] => runtime.block_on(create(&dir)),
        ["destroy", "cluster"] => runtime.block_on(destroy(&dir)),
        _ => {
            eprintln!(
                "Usage: openshift-install create (manifests|cluster) | destroy cluster --dir DIR [--log-level LEVEL] \
                 | version"
            );
            ExitCode::FAILURE
        }
    }
}

fn faults() -> Vec<String> {
    let mut list = std::env::var("FAKE_OPENSHIFT_INSTALL_FAULTS").unwrap_or_default();
    if let Some(file) = std::env::var_os("FAKE_OPENSHIFT_INSTALL_FAULTS_FILE") {
        list.push(',');
        list.push_str(&std::fs::read_to_string(file).unwrap_or_default());
    }
    list.split(',').map(|f| f.trim().to_owned()).filter(|f| !f.is_empty()).collect()
}

/// Notes a canary of `kind` made, where the tests' scan keeps them (`APIARY_CANARY_DIR`'s `minted`).
fn minted(kind: &str) {
    let Some(dir) = std::env::var_os("APIARY_CANARY_DIR").filter(|d| !d.is_empty()) else { return };
    let file = std::fs::OpenOptions::new().create(true).append(true).open(Path::new(&dir).join("minted"));
    if let Ok(mut f) = file {
        // One write, so that jobs noting theirs at once do not interleave.
        let _ = f.write_all(format!("{kind}\n").as_bytes());
    }
}

fn install_time() -> Duration {
    let seconds: f64 =
        std::env::var("FAKE_OPENSHIFT_INSTALL_SECONDS").ok().and_then(|s| s.parse().ok()).unwrap_or(10.0);
    Duration::from_secs_f64(seconds.max(0.0))
}

/// Random lowercase letters and digits, as the installer's infraID suffix and password are made.
fn random(n: usize) -> String {
    use std::hash::{BuildHasher, Hasher};
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut out = String::new();
    while out.len() < n {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_usize(out.len());
        let bits = h.finish();
        out.push(char::from(ALPHABET[(bits % ALPHABET.len() as u64) as usize]));
    }
    out
}

async fn create(dir: &Path) -> ExitCode {
    let _ = std::fs::create_dir_all(dir);
    let mut log = Log::open(dir);
    let config = match made_manifests(dir) {
        Some(config) => config,
        None => match consume_config(dir, &mut log) {
            Ok(config) => config,
            Err(code) => return code,
        },
    };
    if let Err(code) = consume_manifests(dir, &mut log) {
        return code;
    }

    let name = config["metadata"]["name"].as_str().unwrap_or_default().to_owned();
    let base_domain = config["baseDomain"].as_str().unwrap_or_default().to_owned();
    let domain = format!("{name}.{base_domain}");
    let base: String = name.chars().take(21).collect::<String>().trim_end_matches('-').to_owned();
    let infra_id = format!("{base}-{}", random(5));
    let cluster_id = uuid_like();
    let aws = config["platform"]["aws"].as_object().cloned();
    let gcp = config["platform"]["gcp"].as_object().cloned();
    if config["platform"]["azure"].is_object() {
        if let Err(why) = azure_credentials() {
            log.line("fatal", &format!("failed to fetch Metadata: failed to load asset \"Install Config\": {why}"));
            return ExitCode::from(EXIT_INSTALL_CONFIG);
        }
    }
    let _ = std::fs::write(dir.join("metadata.json"), metadata(&config, &infra_id, &cluster_id).to_string());
    // Unique and recognisable, as the fakes' secrets are (`apiary_fakeclouds::canary`): the tests' scan finds it
    // wherever it leaked.
    let password = format!("apiary-canary-kubeadmin-password-{}", random(16));
    minted("kubeadmin-password");
    let _ = std::fs::create_dir_all(dir.join("auth"));
    let _ = std::fs::write(dir.join("auth/kubeconfig"), kubeconfig(&infra_id, &domain));
    let _ = std::fs::write(dir.join("auth/kubeadmin-password"), &password);

    let time = install_time();
    let faults = faults();
    if faults.iter().any(|f| f == "quota") {
        log.line("fatal", "failed to fetch Cluster: failed to fetch dependency of \"Cluster\": failed to generate asset \"Platform Quota Check\": error(MissingQuota): ec2/L-1216C47A is not available in us-east-1 because the required number of resources (36) is more than the limit of (32)");
        return ExitCode::from(EXIT_INFRASTRUCTURE);
    }
    log.line("info", "Creating infrastructure resources...");
    if let Some(gcp) = &gcp {
        if let Err(e) = launch_gcp(&config, gcp, &infra_id).await {
            log.line("error", &format!("failed to create cluster: failed to create infrastructure: {e}"));
            log.line("fatal", "failed to fetch Cluster: failed to generate asset \"Cluster\": failed to create cluster: failed provisioning resources");
            return ExitCode::from(EXIT_INFRASTRUCTURE);
        }
    }
    if let Some(aws) = &aws {
        if let Err(e) = launch(&config, aws, &infra_id, &cluster_id).await {
            log.line("error", &format!("failed to create cluster: failed to create infrastructure: {e}"));
            log.line("fatal", "failed to fetch Cluster: failed to generate asset \"Cluster\": failed to create cluster: failed provisioning resources");
            return ExitCode::from(EXIT_INFRASTRUCTURE);
        }
    }
    tokio::time::sleep(time.mul_f64(0.4)).await;
    log.line("info", &format!("Waiting up to 20m0s for the Kubernetes API at https://api.{domain}:6443..."));
    tokio::time::sleep(time.mul_f64(0.3)).await;
    log.line("info", "API v1.31.6 up");
    log.line("info", "Waiting up to 45m0s for bootstrapping to complete...");
    if faults.iter().any(|f| f == "hang") {
        loop {
            tokio::time::sleep(Duration::from_secs(3600)).await;
        }
    }
    if faults.iter().any(|f| f == "bootstrap") {
        log.line("error", "Bootstrap failed to complete: timed out waiting for the condition");
        log.line("error", "Failed to wait for bootstrapping to complete. This error usually happens when there is a problem with control plane hosts that prevents the control plane operators from creating the control plane.");
        log.line("fatal", "Bootstrap failed to complete");
        return ExitCode::from(EXIT_BOOTSTRAP);
    }
    tokio::time::sleep(time.mul_f64(0.3)).await;
    log.line("info", "Destroying the bootstrap resources...");
    log.line("info", "Install complete!");
    log.line("info", &format!("To access the cluster as the system:admin user when using 'oc', run\n    export KUBECONFIG={}/auth/kubeconfig", dir.display()));
    log.line(
        "info",
        &format!("Access the OpenShift web-console here: https://console-openshift-console.apps.{domain}"),
    );
    log.line("info", &format!("Login to the console with user: \"kubeadmin\", and password: \"{password}\""));
    ExitCode::SUCCESS
}

/// `metadata.json` in the installer's format: the cluster's ids, and where its platform's resources are.
fn metadata(config: &Value, infra_id: &str, cluster_id: &str) -> Value {
    let name = config["metadata"]["name"].as_str().unwrap_or_default();
    let domain = format!("{name}.{}", config["baseDomain"].as_str().unwrap_or_default());
    let mut metadata = json!({
        "clusterName": name,
        "clusterID": cluster_id,
        "infraID": infra_id,
        "featureSet": "",
        "customFeatureSet": null,
    });
    let platform = &config["platform"];
    if let Some(aws) = platform["aws"].as_object() {
        let identifier = json!([
            {format!("kubernetes.io/cluster/{infra_id}"): "owned"},
            {"openshiftClusterID": cluster_id},
            {format!("sigs.k8s.io/cluster-api-provider-aws/cluster/{infra_id}"): "owned"},
        ]);
        metadata["aws"] = json!({"region": aws.get("region"), "identifier": identifier, "clusterDomain": domain});
    }
    if let Some(gcp) = platform["gcp"].as_object() {
        metadata["gcp"] = json!({"region": gcp.get("region"), "projectID": gcp.get("projectID")});
    }
    if let Some(azure) = platform["azure"].as_object() {
        metadata["azure"] = json!({"region": azure.get("region"), "resourceGroupName": format!("{infra_id}-rg")});
    }
    metadata
}

/// install-config.yaml read, parsed and checked as openshift-install checks it, then consumed (its content kept in
/// the state file, the file itself removed); or the exit code of a config refused, with its log lines.
fn consume_config(dir: &Path, log: &mut Log) -> Result<Value, ExitCode> {
    log.line("info", "Consuming Install Config from target directory");
    let text = match std::fs::read_to_string(dir.join("install-config.yaml")) {
        Ok(text) => text,
        Err(e) => {
            log.line("fatal", &format!("failed to fetch Metadata: failed to load asset \"Install Config\": {e}"));
            return Err(ExitCode::from(EXIT_INSTALL_CONFIG));
        }
    };
    let config: Value = match serde_saphyr::from_str(&text) {
        Ok(config) => config,
        Err(e) => {
            log.line("fatal", &format!("failed to fetch Metadata: failed to load asset \"Install Config\": failed to unmarshal install-config.yaml: {e}"));
            return Err(ExitCode::from(EXIT_INSTALL_CONFIG));
        }
    };
    let invalid = validate(&config);
    if !invalid.is_empty() {
        log.line(
            "error",
            &format!(
                "failed to fetch Metadata: failed to load asset \"Install Config\": failed to create install config: \
                 invalid \"install-config.yaml\" file: [{}]",
                invalid.join(", ")
            ),
        );
        return Err(ExitCode::from(EXIT_INSTALL_CONFIG));
    }
    // The installer consumes its input: the config lives on in its state file.
    let _ = std::fs::write(
        dir.join(".openshift_install_state.json"),
        json!({
            "*installconfig.InstallConfig": config,
            "*releaseimage.Image": {"PullSpec": std::env::var("OPENSHIFT_INSTALL_RELEASE_IMAGE_OVERRIDE").unwrap_or_default()},
        })
        .to_string(),
    );
    let _ = std::fs::remove_file(dir.join("install-config.yaml"));
    Ok(config)
}

/// openshift-install's own manifests, as `create manifests` leaves some of them.
const OWN_MANIFESTS: [&str; 3] = [
    "manifests/cluster-config.yaml",
    "manifests/cluster-infrastructure-02-config.yml",
    "openshift/openshift-install-manifests.yaml",
];

/// `create manifests`: the install-config consumed, the cluster's manifests written for an admin to add to.
fn create_manifests(dir: &Path) -> ExitCode {
    let _ = std::fs::create_dir_all(dir);
    let mut log = Log::open(dir);
    let config = match consume_config(dir, &mut log) {
        Ok(config) => config,
        Err(code) => return code,
    };
    let name = config["metadata"]["name"].as_str().unwrap_or_default();
    for file in OWN_MANIFESTS {
        let path = dir.join(file);
        let _ = std::fs::create_dir_all(path.parent().unwrap_or(dir));
        let kind = if file.contains("infrastructure") { "Infrastructure" } else { "ConfigMap" };
        let _ = std::fs::write(path, format!("apiVersion: v1\nkind: {kind}\nmetadata:\n  name: {name}\n"));
    }
    log.line("info", "Manifests created in: manifests and openshift");
    ExitCode::SUCCESS
}

/// The install-config `create manifests` consumed, when it ran in `dir`: `create cluster` goes on from there.
fn made_manifests(dir: &Path) -> Option<Value> {
    if dir.join("install-config.yaml").exists() || !dir.join("manifests").is_dir() {
        return None;
    }
    let state: Value = serde_json::from_slice(&std::fs::read(dir.join(".openshift_install_state.json")).ok()?).ok()?;
    Some(state["*installconfig.InstallConfig"].clone()).filter(Value::is_object)
}

/// The manifests in `manifests/` and `openshift/` read as openshift-install reads them, then consumed into the
/// state file (`*manifests.Openshift`: each file's name); or the exit code of one that is not YAML.
fn consume_manifests(dir: &Path, log: &mut Log) -> Result<(), ExitCode> {
    let mut files = Vec::new();
    for sub in ["manifests", "openshift"] {
        let Ok(entries) = std::fs::read_dir(dir.join(sub)) else { continue };
        let mut names: Vec<String> = entries.filter_map(|e| e.ok()?.file_name().into_string().ok()).collect();
        names.sort();
        for name in names {
            let file = format!("{sub}/{name}");
            let text = std::fs::read_to_string(dir.join(&file)).unwrap_or_default();
            if let Err(e) = serde_saphyr::from_str::<Value>(&text) {
                log.line("fatal", &format!("failed to fetch Cluster: failed to load asset \"Openshift Manifests\": failed to unmarshal {file}: {e}"));
                return Err(ExitCode::from(EXIT_INSTALL_CONFIG));
            }
            files.push(file);
        }
    }
    if files.is_empty() {
        return Ok(());
    }
    let path = dir.join(".openshift_install_state.json");
    let mut state: Value = std::fs::read(&path).ok().and_then(|b| serde_json::from_slice(&b).ok()).unwrap_or(json!({}));
    state["*manifests.Openshift"] = json!({ "FileList": files });
    let _ = std::fs::write(&path, state.to_string());
    let _ = std::fs::remove_dir_all(dir.join("manifests"));
    let _ = std::fs::remove_dir_all(dir.join("openshift"));
    Ok(())
}

/// What openshift-install refuses beyond the schema, in its words.
fn validate(config: &Value) -> Vec<String> {
    let mut invalid = Vec::new();
    let name = config["metadata"]["name"].as_str().unwrap_or_default();
    let dns = |s: &str| {
        !s.is_empty()
            && s.len() <= 253
            && s.split('.').all(|l| {
                !l.is_empty()
                    && l.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
                    && !l.starts_with('-')
                    && !l.ends_with('-')
            })
    };
    if !dns(name) || name.contains('.') {
        invalid.push(format!("metadata.name: Invalid value: {name:?}: a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-'"));
    }
    let domain = config["baseDomain"].as_str().unwrap_or_default();
    if !dns(domain) {
        invalid.push(format!("baseDomain: Invalid value: {domain:?}: a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.'"));
    }
    let pull: Option<Value> = config["pullSecret"].as_str().and_then(|p| serde_json::from_str(p).ok());
    if !pull.is_some_and(|p| p["auths"].is_object()) {
        invalid.push("pullSecret: Invalid value: \"<redacted>\": auths required".to_owned());
    }
    let platforms = config["platform"].as_object().map_or(0, |p| p.len());
    if platforms != 1 {
        invalid.push("platform: Invalid value: \"\": must specify one of the platforms (aws, azure, baremetal, gcp, ibmcloud, none, nutanix, openstack, powervs, vsphere)".to_owned());
    }
    if config["platform"]["aws"].is_object() && config["platform"]["aws"]["region"].as_str().is_none_or(str::is_empty) {
        invalid.push("platform.aws.region: Required value: region must be specified".to_owned());
    }
    invalid
}

fn uuid_like() -> String {
    let hex: String = (0..4).map(|_| random(8)).collect::<String>();
    let hex: String = hex.bytes().map(|b| format!("{:x}", b % 16)).collect();
    format!("{}-{}-4{}-a{}-{}", &hex[..8], &hex[8..12], &hex[13..16], &hex[17..20], &hex[20..32])
}

/// The admin kubeconfig: the fake cluster API's, when one is named.
fn kubeconfig(infra_id: &str, domain: &str) -> String {
    let api: Option<Value> = std::env::var("FAKE_OPENSHIFT_INSTALL_CLUSTER_API")
        .ok()
        .and_then(|path| std::fs::read(path).ok())
        .and_then(|bytes| serde_json::from_slice(&bytes).ok());
    let b64 = |text: &str| base64::engine::general_purpose::STANDARD.encode(text);
    let (server, ca, token) = match &api {
        Some(api) => (
            format!("{}/{infra_id}", api["url"].as_str().unwrap_or_default().trim_end_matches('/')),
            api["caPem"].as_str().map(b64),
            api["token"].as_str().unwrap_or_default().to_owned(),
        ),
        None => (format!("https://api.{domain}:6443"), None, format!("sha256~{}", random(43))),
    };
    let ca = ca.map(|ca| format!("    certificate-authority-data: {ca}\n")).unwrap_or_default();
    format!(
        "apiVersion: v1\nclusters:\n- cluster:\n{ca}    server: {server}\n  name: {infra_id}\ncontexts:\n- context:\n    \
         cluster: {infra_id}\n    user: admin\n  name: admin\ncurrent-context: admin\nkind: Config\npreferences: {{}}\n\
         users:\n- name: admin\n  user:\n    token: {token}\n"
    )
}

fn owned(infra_id: &str) -> String {
    format!("kubernetes.io/cluster/{infra_id}")
}

async fn ec2(region: &str) -> aws_sdk_ec2::Client {
    let sdk = aws_config::defaults(aws_config::BehaviorVersion::latest())
        .region(aws_config::Region::new(region.to_owned()))
        .load()
        .await;
    aws_sdk_ec2::Client::new(&sdk)
}

/// The control plane and compute machines, tagged as openshift-install tags them.
async fn launch(
    config: &Value,
    aws: &serde_json::Map<String, Value>,
    infra_id: &str,
    cluster_id: &str,
) -> Result<(), String> {
    use aws_sdk_ec2::types::{ResourceType, Tag, TagSpecification};
    let region = aws.get("region").and_then(Value::as_str).unwrap_or("us-east-1");
    let client = ec2(region).await;
    let masters = config["controlPlane"]["replicas"].as_i64().unwrap_or(3);
    let workers: i64 = match config["compute"].as_array() {
        Some(pools) => pools.iter().map(|p| p["replicas"].as_i64().unwrap_or(3)).sum(),
        None => 3,
    };
    let image = std::env::var("FAKE_OPENSHIFT_INSTALL_AMI")
        .ok()
        .or_else(|| aws.get("amiID").and_then(Value::as_str).map(str::to_owned))
        .unwrap_or_else(|| "ami-0123456789abcdef0".to_owned());
    let kind = config["compute"][0]["platform"]["aws"]["type"].as_str().unwrap_or("m6i.xlarge").to_owned();
    for (role, count) in [("master", masters), ("worker", workers)] {
        let Ok(count) = i32::try_from(count) else { continue };
        if count <= 0 {
            continue;
        }
        let mut tags: BTreeMap<String, String> = aws
            .get("userTags")
            .and_then(Value::as_object)
            .map(|t| t.iter().map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_owned())).collect())
            .unwrap_or_default();
        tags.extend([
            (owned(infra_id), "owned".to_owned()),
            (format!("sigs.k8s.io/cluster-api-provider-aws/cluster/{infra_id}"), "owned".to_owned()),
            ("openshiftClusterID".to_owned(), cluster_id.to_owned()),
            ("Name".to_owned(), format!("{infra_id}-{role}")),
        ]);
        let spec = tags
            .iter()
            .fold(TagSpecification::builder().resource_type(ResourceType::Instance), |s, (k, v)| {
                s.tags(Tag::builder().key(k).value(v).build())
            })
            .build();
        client
            .run_instances()
            .image_id(&image)
            .instance_type(kind.as_str().into())
            .min_count(count)
            .max_count(count)
            .tag_specifications(spec)
            .send()
            .await
            .map_err(|e| format!("ec2:RunInstances: {}", aws_sdk_ec2::error::DisplayErrorContext(e)))?;
    }
    Ok(())
}

async fn destroy(dir: &Path) -> ExitCode {
    let mut log = Log::open(dir);
    let metadata: Value = match std::fs::read(dir.join("metadata.json")).map(|b| serde_json::from_slice(&b)) {
        Ok(Ok(metadata)) => metadata,
        Ok(Err(e)) => {
            log.line("fatal", &format!("Failed to destroy cluster: failed to load metadata: {e}"));
            return ExitCode::FAILURE;
        }
        Err(e) => {
            log.line("fatal", &format!("Failed to destroy cluster: open {}/metadata.json: {e}", dir.display()));
            return ExitCode::FAILURE;
        }
    };
    let infra_id = metadata["infraID"].as_str().unwrap_or_default().to_owned();
    let marker = dir.join(".fake-destroy-attempted");
    if faults().iter().any(|f| f == "destroy-again") && !marker.exists() {
        let _ = std::fs::write(&marker, "");
        log.line("error", &format!("Failed to delete security group sg-0{} ({infra_id}-node): DependencyViolation: resource has a dependent object", random(8)));
        log.line("fatal", "Failed to destroy cluster: context deadline exceeded");
        return ExitCode::FAILURE;
    }
    tokio::time::sleep(install_time().mul_f64(0.2)).await;
    if let Some(region) = metadata["aws"]["region"].as_str() {
        if let Err(e) = terminate(region, &infra_id).await {
            log.line("fatal", &format!("Failed to destroy cluster: {e}"));
            return ExitCode::FAILURE;
        }
    }
    if let Some(project) = metadata["gcp"]["projectID"].as_str() {
        if let Err(e) = terminate_gcp(project, &infra_id).await {
            log.line("fatal", &format!("Failed to destroy cluster: {e}"));
            return ExitCode::FAILURE;
        }
    }
    if metadata["azure"].is_object() {
        if let Err(why) = azure_credentials() {
            log.line("fatal", &format!("Failed to destroy cluster: {why}"));
            return ExitCode::FAILURE;
        }
    }
    log.line("info", "Uninstallation complete!");
    let _ = std::fs::remove_file(dir.join("metadata.json"));
    ExitCode::SUCCESS
}

async fn terminate(region: &str, infra_id: &str) -> Result<(), String> {
    use aws_sdk_ec2::types::Filter;
    let client = ec2(region).await;
    let found = client
        .describe_instances()
        .filters(Filter::builder().name(format!("tag:{}", owned(infra_id))).values("owned").build())
        .send()
        .await
        .map_err(|e| format!("ec2:DescribeInstances: {}", aws_sdk_ec2::error::DisplayErrorContext(e)))?;
    let ids: Vec<String> = found
        .reservations()
        .iter()
        .flat_map(|r| r.instances())
        .filter(|i| i.state().and_then(|s| s.name()).is_none_or(|n| n.as_str() != "terminated"))
        .filter_map(|i| i.instance_id().map(str::to_owned))
        .collect();
    if !ids.is_empty() {
        client
            .terminate_instances()
            .set_instance_ids(Some(ids))
            .send()
            .await
            .map_err(|e| format!("ec2:TerminateInstances: {}", aws_sdk_ec2::error::DisplayErrorContext(e)))?;
    }
    Ok(())
}

/// The service principal `AZURE_AUTH_LOCATION` names, as openshift-install reads it: `Err` says what is wrong.
fn azure_credentials() -> Result<(), String> {
    let path = std::env::var("AZURE_AUTH_LOCATION")
        .map_err(|_| "failed to load Azure credentials: AZURE_AUTH_LOCATION is not set".to_owned())?;
    let text = std::fs::read_to_string(&path).map_err(|e| format!("failed to load Azure credentials: {path}: {e}"))?;
    let doc: Value =
        serde_json::from_str(&text).map_err(|_| format!("failed to load Azure credentials: {path}: not JSON"))?;
    match ["subscriptionId", "tenantId", "clientId", "clientSecret"]
        .iter()
        .find(|f| doc[**f].as_str().is_none_or(str::is_empty))
    {
        Some(field) => Err(format!("failed to load Azure credentials: {path}: {field} is missing")),
        None => Ok(()),
    }
}

/// The Compute Engine API openshift-install calls: gcloud's override when set (the fake's, in tests), else Google's.
fn gcp_endpoint() -> String {
    std::env::var("CLOUDSDK_API_ENDPOINT_OVERRIDES_COMPUTE")
        .unwrap_or_else(|_| "https://compute.googleapis.com/compute/v1/".to_owned())
        .trim_end_matches('/')
        .to_owned()
}

/// A Compute Engine client as openshift-install makes one: the service account key `GOOGLE_APPLICATION_CREDENTIALS`
/// names, a token for it, and the API.
struct Gcp {
    http: apiary_clouds::http::Http,
    token: String,
    endpoint: String,
}

enum Verb {
    Get,
    Post(Value),
    Delete,
}

impl Gcp {
    async fn connect() -> Result<Self, String> {
        let path = std::env::var("GOOGLE_APPLICATION_CREDENTIALS")
            .map_err(|_| "failed to load GCP credentials: GOOGLE_APPLICATION_CREDENTIALS is not set".to_owned())?;
        let text =
            std::fs::read_to_string(&path).map_err(|e| format!("failed to load GCP credentials: {path}: {e}"))?;
        let key = apiary_clouds::gcp::auth::ServiceAccountKey::parse(&path, &text).map_err(|e| e.to_string())?;
        let http = apiary_clouds::http::Http::new(None).map_err(|e| e.to_string())?;
        let cache = apiary_clouds::tokens::TokenCache::default();
        let token = apiary_clouds::gcp::auth::token(&cache, &http, &key).await.map_err(|e| e.to_string())?;
        Ok(Self { http, token, endpoint: gcp_endpoint() })
    }

    async fn call(&self, verb: Verb, path: &str) -> Result<Value, String> {
        let url = format!("{}/{path}", self.endpoint);
        let answer = self
            .http
            .send("gcp:compute", |c| {
                let req = match &verb {
                    Verb::Get => c.get(&url),
                    Verb::Post(body) => c.post(&url).json(body),
                    Verb::Delete => c.delete(&url),
                };
                req.bearer_auth(&self.token)
            })
            .await
            .map_err(|e| e.to_string())?;
        if !answer.is_success() {
            return Err(format!("googleapi: Error {}: {}", answer.status.as_u16(), answer.text()));
        }
        answer.json("gcp:compute").map_err(|e| e.to_string())
    }
}

/// On GCP: the control plane and compute machines as openshift-install makes them, one `instances.insert` each,
/// labelled `kubernetes-io-cluster-<infraID>=owned` and with `platform.gcp.userLabels`, in each machine pool's
/// first zone.
async fn launch_gcp(config: &Value, gcp: &serde_json::Map<String, Value>, infra_id: &str) -> Result<(), String> {
    let client = Gcp::connect().await?;
    let project = gcp.get("projectID").and_then(Value::as_str).unwrap_or_default();
    let region = gcp.get("region").and_then(Value::as_str).unwrap_or_default();
    let mut labels: BTreeMap<String, String> = gcp
        .get("userLabels")
        .and_then(Value::as_array)
        .map(|l| {
            l.iter().filter_map(|p| Some((p["key"].as_str()?.to_owned(), p["value"].as_str()?.to_owned()))).collect()
        })
        .unwrap_or_default();
    labels.insert(apiary_clouds::gcp::cluster_label(infra_id), "owned".to_owned());
    let workers: i64 =
        config["compute"].as_array().map_or(3, |p| p.iter().map(|p| p["replicas"].as_i64().unwrap_or(3)).sum());
    let masters = config["controlPlane"]["replicas"].as_i64().unwrap_or(3);
    for (role, pool, count) in
        [("master", &config["controlPlane"], masters), ("worker", &config["compute"][0], workers)]
    {
        let machine = &pool["platform"]["gcp"];
        let zone = machine["zones"][0].as_str().map_or_else(|| format!("{region}-b"), str::to_owned);
        let kind = machine["type"].as_str().unwrap_or("n2-standard-4");
        for i in 0..count {
            let body = json!({"name": format!("{infra_id}-{role}-{i}"), "machineType": format!("zones/{zone}/machineTypes/{kind}"), "labels": labels});
            client.call(Verb::Post(body), &format!("projects/{project}/zones/{zone}/instances")).await?;
        }
    }
    Ok(())
}

/// Every instance labelled for `infra_id` in `project`, deleted.
async fn terminate_gcp(project: &str, infra_id: &str) -> Result<(), String> {
    let client = Gcp::connect().await?;
    let filter = format!("labels.{} = \"owned\"", apiary_clouds::gcp::cluster_label(infra_id));
    let mut found = Vec::new();
    let mut page = String::new();
    loop {
        let path =
            format!("projects/{project}/aggregated/instances?filter={}{page}", apiary_clouds::http::escape(&filter));
        let listed = client.call(Verb::Get, &path).await?;
        for (zone, entry) in listed["items"].as_object().into_iter().flatten() {
            let zone = zone.trim_start_matches("zones/").to_owned();
            let names = entry["instances"].as_array().into_iter().flatten().filter_map(|i| i["name"].as_str());
            found.extend(names.map(|n| (zone.clone(), n.to_owned())));
        }
        match listed["nextPageToken"].as_str() {
            Some(next) => page = format!("&pageToken={}", apiary_clouds::http::escape(next)),
            None => break,
        }
    }
    for (zone, name) in found {
        client.call(Verb::Delete, &format!("projects/{project}/zones/{zone}/instances/{name}")).await?;
    }
    Ok(())
}
