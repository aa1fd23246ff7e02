//! The installer's AWS adapters against the emulator (`AWS_ENDPOINT_URL`), as far as it emulates: the records'
//! conditional writes and the pool index, the install directories and pools' settings in S3, and the jobs as
//! CodeBuild builds (the emulator runs no buildspec: it accepts a build and reports it done a look later). With
//! `APIARY_WIRE_OUT` set to a directory, every CodeBuild request is written there as `codebuild.json`, which
//! `tests/conformance_codebuild.py` (`make conformance`) holds against botocore's model of the service.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use apiary_installer::aws::{CodeBuildJobs, DynamoRecords, DynamoReplays, S3Dirs, S3Pools, Settings, POOL_INDEX};
use apiary_installer::model::{Phase, Record};
use apiary_installer::ports::{Dirs, JobKind, JobSpec, JobState, Jobs, Pools, Records};
use aws_sdk_dynamodb::types::{
    AttributeDefinition, BillingMode, GlobalSecondaryIndex, KeySchemaElement, KeyType, Projection, ProjectionType,
    ScalarAttributeType,
};
use aws_smithy_runtime_api::client::interceptors::context::BeforeTransmitInterceptorContextRef;
use aws_smithy_runtime_api::client::interceptors::Intercept;
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use aws_smithy_types::config_bag::ConfigBag;
use serde_json::{json, Value};

mod common;

const NO_EMULATOR: &str = "these tests need the AWS emulator: run them with `make test` or `make system`, or start \
                           `.venv/bin/python infra/emulator.py --port 5077` (make venv installs it) and set \
                           AWS_ENDPOINT_URL=http://127.0.0.1:5077 AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test \
                           AWS_REGION=us-east-1";

async fn sdk() -> aws_config::SdkConfig {
    let endpoint =
        std::env::var("AWS_ENDPOINT_URL").unwrap_or_else(|_| panic!("AWS_ENDPOINT_URL is not set: {NO_EMULATOR}"));
    let hostport = endpoint.trim_start_matches("http://").trim_end_matches('/').to_owned();
    assert!(std::net::TcpStream::connect(&hostport).is_ok(), "nothing listens at {endpoint}: {NO_EMULATOR}");
    apiary_aws::load_sdk_config().await
}

fn unique(what: &str) -> String {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
    format!("apiary-installer-{what}-{}-{nanos}", std::process::id())
}

fn record(id: &str, pool: &str, revision: u64) -> Record {
    Record {
        id: id.into(),
        pool: pool.into(),
        cluster_name: id.into(),
        domain: format!("{id}.ci.example.com"),
        attempt: 1,
        release_image: "quay.io/openshift-release-dev/ocp-release:4.18.1-x86_64".into(),
        install_timeout: 9000,
        role_arn: None,
        platform: None,
        phase: Phase::Installing,
        job: None,
        stopping: None,
        runs: 0,
        reinstall: false,
        infra_id: None,
        outputs: Default::default(),
        secrets: vec![],
        message: None,
        revision,
    }
}

#[tokio::test]
async fn records_are_written_only_over_the_revision_read_and_listed_by_pool() {
    let sdk = sdk().await;
    let table = unique("records");
    let ddb = aws_sdk_dynamodb::Client::new(&sdk);
    let key = |name: &str, kind| KeySchemaElement::builder().attribute_name(name).key_type(kind).build().expect("key");
    let attribute = |name: &str| {
        AttributeDefinition::builder()
            .attribute_name(name)
            .attribute_type(ScalarAttributeType::S)
            .build()
            .expect("attr")
    };
    let index = GlobalSecondaryIndex::builder()
        .index_name(POOL_INDEX)
        .key_schema(key("pool", KeyType::Hash))
        .key_schema(key("id", KeyType::Range))
        .projection(Projection::builder().projection_type(ProjectionType::All).build())
        .build()
        .expect("index");
    ddb.create_table()
        .table_name(&table)
        .billing_mode(BillingMode::PayPerRequest)
        .key_schema(key("id", KeyType::Hash))
        .attribute_definitions(attribute("id"))
        .attribute_definitions(attribute("pool"))
        .global_secondary_indexes(index)
        .send()
        .await
        .expect("table");
    let records = DynamoRecords::new(&sdk, &table);

    assert!(records.put(&record("ci-1", "ocp", 1), None).await.expect("put"));
    assert!(!records.put(&record("ci-1", "ocp", 1), None).await.expect("put"), "a second create loses");
    assert!(records.put(&record("ci-1", "ocp", 2), Some(1)).await.expect("put"));
    assert!(!records.put(&record("ci-1", "ocp", 2), Some(1)).await.expect("put"), "a stale revision loses");
    assert!(records.put(&record("ci-2", "ocp", 1), None).await.expect("put"));
    assert!(records.put(&record("ci-3", "other", 1), None).await.expect("put"));
    assert_eq!(records.get("ci-1").await.expect("get").map(|r| r.revision), Some(2));
    let listed: Vec<String> = records.list("ocp").await.expect("list").into_iter().map(|r| r.id).collect();
    assert_eq!(listed, ["ci-1", "ci-2"]);
    assert!(!records.delete("ci-1", 1).await.expect("delete"), "a stale removal loses");
    assert!(records.delete("ci-1", 2).await.expect("delete"));
    assert_eq!(records.get("ci-1").await.expect("get"), None);

    // The accepted requests, in the same table: an id is taken again for the same request only, until it expires;
    // never in the pool index.
    use apiary_installer::ports::Replays;
    let replays = DynamoReplays::new(&sdk, &table);
    assert!(replays.accept("ci-2.GetCluster.1", "d1", 1000, 1360).await.expect("accept"));
    assert!(replays.accept("ci-2.GetCluster.1", "d1", 1060, 1420).await.expect("accept"), "Apiary's next look");
    assert!(!replays.accept("ci-2.GetCluster.1", "d2", 1100, 1460).await.expect("accept"), "another request");
    assert!(replays.accept("ci-2.GetCluster.1", "d2", 1500, 1860).await.expect("accept"), "after it expired");
    let listed: Vec<String> = records.list("ocp").await.expect("list").into_iter().map(|r| r.id).collect();
    assert_eq!(listed, ["ci-2"]);
}

#[tokio::test]
async fn install_directories_and_settings_live_in_the_bucket() {
    let sdk = sdk().await;
    let bucket = unique("dirs");
    let s3 = aws_sdk_s3::Client::from_conf(aws_sdk_s3::config::Builder::from(&sdk).force_path_style(true).build());
    s3.create_bucket().bucket(&bucket).send().await.expect("bucket");
    let dirs = S3Dirs::new(&sdk, &bucket, None);
    dirs.write("ci-1", "install-config.yaml", b"apiVersion: v1\n").await.expect("write");
    dirs.write("ci-1", "auth/kubeconfig", b"kubeconfig").await.expect("write");
    dirs.write("ci-10", "metadata.json", b"{}").await.expect("write");
    assert_eq!(dirs.read("ci-1", "auth/kubeconfig").await.expect("read").as_deref(), Some(&b"kubeconfig"[..]));
    assert_eq!(dirs.read("ci-1", "metadata.json").await.expect("read"), None);
    let head = s3.head_object().bucket(&bucket).key("clusters/ci-1/auth/kubeconfig").send().await.expect("head");
    assert_eq!(head.server_side_encryption().map(|e| e.as_str()), Some("aws:kms"), "kept encrypted");
    dirs.clear("ci-1").await.expect("clear");
    assert_eq!(dirs.read("ci-1", "install-config.yaml").await.expect("read"), None);
    assert!(dirs.read("ci-10", "metadata.json").await.expect("read").is_some(), "another cluster's stays");

    let pools = S3Pools(dirs.clone());
    assert_eq!(pools.settings("ocp").await.expect("settings"), None);
    let settings = json!({
        "releaseImage": "quay.io/openshift-release-dev/ocp-release:4.18.1-x86_64",
        "installConfig": "apiVersion: v1\n",
        "pullSecret": "arn:aws:secretsmanager:us-east-1:123456789012:secret:pull",
    });
    dirs.put("pools/ocp.json", settings.to_string().as_bytes()).await.expect("put");
    let read = pools.settings("ocp").await.expect("settings").expect("there");
    assert_eq!(read.release_image, "quay.io/openshift-release-dev/ocp-release:4.18.1-x86_64");
    dirs.put("pools/bad.json", br#"{"releaseImage": "x"}"#).await.expect("put");
    let why = pools.settings("bad").await.expect_err("malformed").to_string();
    assert!(why.contains("pools/bad.json") && why.contains("pullSecret"), "{why}");
    // The templates pools name, beside the settings; a name that is a path never becomes a key.
    assert_eq!(pools.template("ocp-aws").await.expect("template"), None);
    dirs.put("templates/ocp-aws.yaml", b"apiVersion: v1\n").await.expect("put");
    assert_eq!(pools.template("ocp-aws").await.expect("template").as_deref(), Some("apiVersion: v1\n"));
    let why = pools.template("../pools/ocp").await.expect_err("a path").to_string();
    assert!(why.contains("installConfigTemplate"), "{why}");
}

/// Every request a client sends: its target and its body.
#[derive(Debug, Default, Clone)]
struct Recorder(Arc<Mutex<Vec<Value>>>);

impl Intercept for Recorder {
    fn name(&self) -> &'static str {
        "recorder"
    }

    fn read_before_transmit(
        &self,
        context: &BeforeTransmitInterceptorContextRef<'_>,
        _: &RuntimeComponents,
        _: &mut ConfigBag,
    ) -> Result<(), aws_smithy_runtime_api::box_error::BoxError> {
        let req = context.request();
        let header = |name: &str| req.headers().get(name).unwrap_or_default().to_owned();
        let body: Value = req.body().bytes().and_then(|b| serde_json::from_slice(b).ok()).unwrap_or(Value::Null);
        let seen = json!({
            "method": req.method(),
            "uri": req.uri(),
            "target": header("x-amz-target"),
            "contentType": header("content-type"),
            "body": body,
        });
        self.0.lock().unwrap_or_else(|e| e.into_inner()).push(seen);
        Ok(())
    }
}

#[tokio::test]
async fn codebuild_runs_each_job_as_a_build_told_by_its_environment() {
    let sdk = sdk().await;
    let project = unique("project");
    let recorder = Recorder::default();
    let config = aws_sdk_codebuild::config::Builder::from(&sdk).interceptor(recorder.clone()).build();
    let client = aws_sdk_codebuild::Client::from_conf(config);
    use aws_sdk_codebuild::types::{
        ArtifactsType, ComputeType, EnvironmentType, ProjectArtifacts, ProjectEnvironment, ProjectSource, SourceType,
    };
    client
        .create_project()
        .name(&project)
        .source(
            // The emulator asks a location of every source (CodeBuild does not of NO_SOURCE, as
            // infra/installer.yaml's project is).
            ProjectSource::builder()
                .r#type(SourceType::S3)
                .location("installer-bucket/buildspec.zip")
                .build()
                .expect("source"),
        )
        .artifacts(ProjectArtifacts::builder().r#type(ArtifactsType::NoArtifacts).build().expect("artifacts"))
        .environment(
            ProjectEnvironment::builder()
                .r#type(EnvironmentType::LinuxContainer)
                .image("aws/codebuild/amazonlinux2-x86_64-standard:5.0")
                .compute_type(ComputeType::BuildGeneral1Small)
                .build()
                .expect("environment"),
        )
        .service_role("arn:aws:iam::123456789012:role/apiary-installer-jobs")
        .send()
        .await
        .expect("project");
    recorder.0.lock().expect("recorder").clear();
    let jobs = CodeBuildJobs::with_client(client, &project, "installer-bucket");
    let spec = JobSpec {
        kind: JobKind::Install,
        cluster: "ci-1".into(),
        pool: "ocp".into(),
        run: 1,
        release_image: "quay.io/openshift-release-dev/ocp-release:4.18.1-x86_64".into(),
        timeout: Duration::from_secs(150 * 60),
        role_arn: Some("arn:aws:iam::210987654321:role/ocp-installer".into()),
    };
    let build = jobs.start(&spec).await.expect("started");
    assert!(build.starts_with(&format!("{project}:")), "{build}");
    // The emulator runs nothing: it reports the build in progress or done, soon done.
    let mut state = JobState::Running;
    for _ in 0..5 {
        state = jobs.state(&build).await.expect("state");
        if state != JobState::Running {
            break;
        }
    }
    assert_eq!(state, JobState::Succeeded);
    jobs.stop(&build).await.expect("stopping a finished build is nothing to do");
    let destroy = jobs.start(&JobSpec { kind: JobKind::Destroy, run: 2, ..spec.clone() }).await.expect("started");
    jobs.stop(&destroy).await.expect("stopped");
    // (The emulator reports a stopped build done at the next look: `build_state`'s unit tests hold the rest.)
    let unknown = jobs.state(&format!("{project}:00000000-0000-0000-0000-000000000000")).await.expect("state");
    assert!(matches!(unknown, JobState::Failed(ref why) if why.contains("not known")), "{unknown:?}");

    let sent = recorder.0.lock().expect("recorder").clone();
    let start = &sent[0];
    assert_eq!(start["target"], "CodeBuild_20161006.StartBuild");
    let env: Vec<(String, String)> = start["body"]["environmentVariablesOverride"]
        .as_array()
        .expect("env")
        .iter()
        .map(|v| (v["name"].as_str().unwrap_or_default().into(), v["value"].as_str().unwrap_or_default().into()))
        .collect();
    assert!(env.contains(&("APIARY_ACTION".into(), "create".into())), "{env:?}");
    assert!(env.contains(&("APIARY_INSTALL_DIR".into(), "s3://installer-bucket/clusters/ci-1/".into())), "{env:?}");
    assert!(env.contains(&("APIARY_INSTALL_ROLE_ARN".into(), "arn:aws:iam::210987654321:role/ocp-installer".into())));
    assert_eq!(
        (start["body"]["timeoutInMinutesOverride"].as_i64(), start["body"]["idempotencyToken"].as_str()),
        (Some(150), Some("ci-1-install-1"))
    );
    if let Some(dir) = std::env::var_os("APIARY_WIRE_OUT") {
        let path = std::path::Path::new(&dir).join("codebuild.json");
        std::fs::write(path, serde_json::to_vec_pretty(&sent).expect("json")).expect("written");
    }
}

/// The installer's stack (`infra/installer.yaml`) deployed into the emulator as a team deploys it: its settings.
fn deploy_installer_stack() -> std::collections::HashMap<String, String> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("the repository").to_owned();
    let python = std::env::var("APIARY_PYTHON").unwrap_or_else(|_| root.join(".venv/bin/python").display().to_string());
    let name = unique("stack").replace('_', "-");
    let env_file = std::env::temp_dir().join(format!("{name}.env"));
    let out = std::process::Command::new(&python)
        .arg(root.join("infra/deploy_installer_local.py"))
        .arg(&name)
        .arg(&env_file)
        .output()
        .unwrap_or_else(|e| panic!("{python}: {e}: {NO_EMULATOR}"));
    assert!(out.status.success(), "deploying infra/installer.yaml: {}", String::from_utf8_lossy(&out.stderr));
    let text = std::fs::read_to_string(&env_file).expect("the stack's settings");
    text.lines().filter_map(|l| l.split_once('=')).map(|(k, v)| (k.to_owned(), v.to_owned())).collect()
}

const SIGNING_KEY: &str = "whsec_YXBpYXJ5LWNhbmFyeS1zaWduaW5nLWtleS01ZjFkMGMzYTllN2IyNDY4";

async fn signed(
    installer: &apiary_installer::service::Installer,
    method: &str,
    path: &str,
    body: Value,
) -> (u16, Value) {
    common::answer(installer, common::signed(SIGNING_KEY, method, path, &body)).await
}

/// A template of clusters on GCP, whose jobs need the pool's service account key.
const GCP_TEMPLATE: &str =
    "apiVersion: v1\nmetadata:\n  name: {clusterName}\nbaseDomain: {baseDomain}\nplatform:\n  gcp:\n    \
                            projectID: ocp-ci\n    region: europe-west1\n";

/// A template kept apart, which a pool names (`installConfigTemplate`).
const NAMED_TEMPLATE: &str =
    "apiVersion: v1\nmetadata:\n  name: {clusterName}\nbaseDomain: {baseDomain}\ncontrolPlane:\n  name: master\n  \
     replicas: 1\nplatform:\n  none: {}\n";

/// The installer's stack deployed, with pool `ocp`'s settings uploaded by the team (with the installer's key, as
/// docs/clouds.md says): the operator's configuration, the stack's settings and the function's.
async fn installer_stack() -> (aws_config::SdkConfig, std::collections::HashMap<String, String>, Settings) {
    let operator = sdk().await;
    let env = deploy_installer_stack();
    let settings = Settings::from_env(|name| env.get(name).cloned()).expect("settings");
    let pool = json!({
        "releaseImage": "quay.io/openshift-release-dev/ocp-release:4.18.1-x86_64",
        "installConfig": "apiVersion: v1\nmetadata:\n  name: {clusterName}\nbaseDomain: {baseDomain}\nplatform:\n  none: {}\n",
        "pullSecret": env["APIARY_INSTALLER_PULL_SECRET"],
        "manifests": ["apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: pool-of-{clusterName}\n"],
    });
    let bucket = S3Dirs::new(&operator, &settings.bucket, settings.kms_key.clone());
    // A GCP service account key for the pool's clusters on GCP, tagged for it.
    let key = json!({"type": "service_account", "client_email": "openshift-install@ocp-ci.iam.gserviceaccount.com",
                     "private_key": "-----BEGIN PRIVATE KEY-----\napiary-canary-gcp-key-buildspec\n-----END PRIVATE KEY-----\n",
                     "token_uri": "https://oauth2.googleapis.com/token"});
    let tag = |k: &str, v: &str| aws_sdk_secretsmanager::types::Tag::builder().key(k).value(v).build();
    let credentials = aws_sdk_secretsmanager::Client::new(&operator)
        .create_secret()
        .name(format!("{}/ocp/gcp-key", settings.bucket))
        .secret_string(key.to_string())
        .tags(tag("apiary", "true"))
        .tags(tag("apiary:pools", "ocp"))
        .send()
        .await
        .expect("the pool's GCP key");
    let mut pool = pool;
    pool["credentials"] = json!(credentials.arn().expect("its ARN"));
    bucket.put("pools/ocp.json", pool.to_string().as_bytes()).await.expect("the pool's settings");
    bucket.put("templates/ocp-gcp.yaml", GCP_TEMPLATE.as_bytes()).await.expect("a GCP template");
    bucket.put("templates/ocp-none.yaml", NAMED_TEMPLATE.as_bytes()).await.expect("a template pools name");
    (operator, env, settings)
}

/// Builds of the stack's project (the emulator runs none, and reports one done at the next look) whose work is played
/// as it starts, with the jobs' role: the directory read, and openshift-install's outputs written back as the
/// buildspec's sync writes them (a destroy reads `metadata.json` and leaves its log).
struct PlayedBuilds {
    builds: CodeBuildJobs,
    job: S3Dirs,
}

#[async_trait::async_trait]
impl Jobs for PlayedBuilds {
    async fn start(&self, spec: &JobSpec) -> apiary_ports::Result<String> {
        let build = self.builds.start(spec).await?;
        let id = spec.cluster.as_str();
        match spec.kind {
            JobKind::Install => {
                let config = self.job.read(id, "install-config.yaml").await?.expect("the job's install-config");
                let config: Value = serde_json::from_slice(&config).expect("the rendered install-config");
                assert_eq!(config["metadata"]["name"], id, "the rendered install-config");
                assert_eq!(config["controlPlane"]["replicas"], 1, "the template the pool names: {config}");
                let metadata = json!({"clusterName": id, "clusterID": "5a1c9e3f-0000-4000-8000-000000000001",
                                      "infraID": format!("{id}-x7k2p")});
                self.job.write(id, "metadata.json", metadata.to_string().as_bytes()).await?;
                let kubeconfig = format!(
                    "apiVersion: v1\nclusters:\n- cluster:\n    server: https://api.{id}.ci.example.com:6443\n"
                );
                self.job.write(id, "auth/kubeconfig", kubeconfig.as_bytes()).await?;
                self.job.write(id, "auth/kubeadmin-password", b"aaaaa-bbbbb-ccccc-ddddd").await?;
            }
            JobKind::Destroy => {
                assert!(self.job.read(id, "metadata.json").await?.is_some(), "a destroy needs the metadata");
                self.job.write(id, ".openshift_install.log", b"level=info msg=Uninstallation complete!\n").await?;
            }
        }
        Ok(build)
    }

    async fn state(&self, id: &str) -> apiary_ports::Result<JobState> {
        self.builds.state(id).await
    }

    async fn stop(&self, id: &str) -> apiary_ports::Result<()> {
        self.builds.stop(id).await
    }
}

/// The function runs as a session of its role, the jobs' part as a session of theirs, and the emulator holds every
/// call to the role's policies (a refused call fails the look it is made in; `make test` then fails on the call log
/// naming the statement it lacks, and on any statement of either role no call used).
#[tokio::test]
async fn an_install_and_its_removal_need_no_call_the_installers_roles_do_not_allow() {
    let (operator, env, settings) = installer_stack().await;
    let bucket = settings.bucket.clone();
    let function = apiary_aws::assume(&operator, &env["APIARY_INSTALLER_ROLE_ARN"], "installer").await;
    let job = S3Dirs::new(
        &apiary_aws::assume(&operator, &env["APIARY_INSTALLER_JOBS_ROLE_ARN"], "job").await,
        &bucket,
        settings.kms_key.clone(),
    );
    let mut installer = apiary_installer::aws::installer(&function, &settings).await.expect("the signing key, read");
    let builds = CodeBuildJobs::new(&function, &settings.project, &bucket);
    installer.jobs = std::sync::Arc::new(PlayedBuilds { builds, job });

    // The pool names a template kept apart, pinned to its content: the function reads it with its role.
    let pinned = {
        use sha2::Digest;
        let digest: String = sha2::Sha256::digest(NAMED_TEMPLATE).iter().map(|b| format!("{b:02x}")).collect();
        format!("ocp-none@sha256:{digest}")
    };
    let request = json!({
        "pool": "ocp", "clusterId": "ci-1", "clusterName": "ci-1", "baseDomain": "ci.example.com",
        "labels": {}, "parameters": {}, "attempt": 1, "installConfigTemplate": pinned,
    });
    // (The emulator reports a build done at its first look, which the request itself may make.)
    let (status, body) = signed(&installer, "PUT", "/clusters/ci-1", request).await;
    assert!(matches!(status, 200 | 202), "{body}");
    let mut look = (0, Value::Null);
    for _ in 0..10 {
        look = signed(&installer, "GET", "/clusters/ci-1", Value::Null).await;
        if look.1["state"] != "Provisioning" {
            break;
        }
    }
    let (status, body) = look;
    assert_eq!((status, body["state"].as_str()), (200, Some("Ready")), "{body}");
    let kubeconfig_arn = body["outputs"]["kubeconfigSecretArn"].as_str().expect("stored").to_owned();
    let (status, body) = signed(&installer, "GET", "/clusters?pool=ocp", Value::Null).await;
    assert_eq!((status, body), (200, json!({"clusters": [{"id": "ci-1", "state": "Ready"}]})));

    let mut removal = (0, Value::Null);
    for _ in 0..10 {
        removal = signed(&installer, "DELETE", "/clusters/ci-1", Value::Null).await;
        if removal.0 != 202 {
            break;
        }
    }
    assert_eq!(removal.0, 404, "{}", removal.1);
    let secrets = aws_sdk_secretsmanager::Client::new(&operator);
    assert!(secrets.describe_secret().secret_id(&kubeconfig_arn).send().await.is_err(), "the credentials are removed");
    assert_eq!(S3Dirs::new(&operator, &bucket, None).read("ci-1", "metadata.json").await.expect("read"), None);
}

/// `infra/installer.yaml`'s buildspec: each phase's commands, in the order CodeBuild runs the phases.
fn buildspec() -> Vec<(String, Vec<String>)> {
    #[derive(serde::Deserialize)]
    struct Spec {
        phases: std::collections::BTreeMap<String, Phase>,
    }
    #[derive(serde::Deserialize)]
    struct Phase {
        commands: Vec<String>,
    }
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("the repository").to_owned();
    let template = std::fs::read_to_string(root.join("infra/installer.yaml")).expect("infra/installer.yaml");
    let lines: Vec<&str> = template.lines().collect();
    let at = lines.iter().position(|l| l.trim() == "BuildSpec: |").expect("the project's BuildSpec");
    let indent = lines[at].len() - lines[at].trim_start().len();
    let block: Vec<&str> = lines[at + 1..]
        .iter()
        .take_while(|l| l.trim().is_empty() || l.len() - l.trim_start().len() > indent)
        .copied()
        .collect();
    let inner =
        block.iter().filter(|l| !l.trim().is_empty()).map(|l| l.len() - l.trim_start().len()).min().unwrap_or(0);
    let text: String = block.iter().map(|l| format!("{}\n", l.get(inner..).unwrap_or(""))).collect();
    let mut spec: Spec = serde_saphyr::from_str(&text).expect("the buildspec is YAML");
    ["install", "pre_build", "build", "post_build"]
        .iter()
        .filter_map(|phase| spec.phases.remove(*phase).map(|p| (phase.to_string(), p.commands)))
        .collect()
}

/// openshift-install's stand-in, which `oc adm release extract` (the next stand-in) writes where it is told: `create
/// cluster` consumes install-config.yaml and leaves what the installer leaves (metadata.json first, then, past the
/// bootstrap, the credentials); with the file `$STAND_IN_FAIL` present its bootstrap fails as a real one does.
/// `destroy cluster` needs metadata.json, and removes it.
const OPENSHIFT_INSTALL: &str = r#"#!/bin/bash
action="$1 $2" dir=$4
log="$dir/.openshift_install.log"
say() { echo "level=$1 msg=\"$2\"" | tee -a "$log"; }
case "$action" in
"create manifests")
  [ -f "$dir/install-config.yaml" ] || { say fatal "failed to fetch Master Machines: install-config.yaml is missing"; exit 3; }
  grep -q "$APIARY_CLUSTER" "$dir/install-config.yaml" || { say fatal "install-config.yaml: another cluster's"; exit 3; }
  mv "$dir/install-config.yaml" "$dir/.consumed-install-config"
  mkdir -p "$dir/manifests" "$dir/openshift"
  echo "kind: ConfigMap" > "$dir/openshift/openshift-install-manifests.yaml"
  say info "Manifests created in: manifests and openshift";;
"create cluster")
  # On GCP openshift-install reads the service account key GOOGLE_APPLICATION_CREDENTIALS names; the job must have
  # taken it out of the directory first.
  gcp=""
  grep -qs '"gcp":' "$dir/install-config.yaml" "$dir/.consumed-install-config" && gcp=yes
  if [ -n "$gcp" ]; then
    grep -qs client_email "${GOOGLE_APPLICATION_CREDENTIALS:-/none}" || { say fatal "failed to load GCP credentials"; exit 3; }
    [ ! -e "$dir/.apiary/gcp-credentials.json" ] || { say fatal "the key was left in the directory"; exit 3; }
  fi
  if [ -f "$dir/.consumed-install-config" ]; then
    # After create manifests: the pool's manifests must be in openshift/ by now.
    for m in "$dir"/.apiary/manifests/*.yaml; do
      [ -f "$dir/openshift/$(basename "$m")" ] || { say fatal "manifest $(basename "$m") is not in openshift/"; exit 3; }
    done
    ls "$dir/openshift" > "$dir/.consumed-manifests"
    rm -rf "$dir/manifests" "$dir/openshift" "$dir/.consumed-install-config"
  else
    [ -f "$dir/install-config.yaml" ] || { say fatal "failed to fetch Metadata: install-config.yaml is missing"; exit 3; }
    grep -q "$APIARY_CLUSTER" "$dir/install-config.yaml" || { say fatal "install-config.yaml: another cluster's"; exit 3; }
    rm "$dir/install-config.yaml"
  fi
  printf '{"clusterName":"%s","clusterID":"5a1c9e3f-0000-4000-8000-000000000001","infraID":"%s-x7k2p"%s}' \
    "$APIARY_CLUSTER" "$APIARY_CLUSTER" "${gcp:+,\"gcp\":{\"projectID\":\"ocp-ci\"\}}" > "$dir/metadata.json"
  if [ -e "$STAND_IN_FAIL" ]; then
    say error "Bootstrap failed to complete: timed out waiting for the condition"
    exit 5
  fi
  mkdir -p "$dir/auth"
  printf 'apiVersion: v1\nclusters:\n- cluster:\n    server: https://api.%s.ci.example.com:6443\n' "$APIARY_CLUSTER" \
    > "$dir/auth/kubeconfig"
  echo "aaaaa-bbbbb-ccccc-ddddd" > "$dir/auth/kubeadmin-password"
  say info "Install complete!"
  # As openshift-install tells it, at info level.
  say info "Login to the console with user: \\\"kubeadmin\\\", and password: \\\"$(cat "$dir/auth/kubeadmin-password")\\\"";;
"destroy cluster")
  [ -f "$dir/metadata.json" ] || { say fatal "open $dir/metadata.json: no such file or directory"; exit 1; }
  if grep -q '"gcp"' "$dir/metadata.json"; then
    grep -qs client_email "${GOOGLE_APPLICATION_CREDENTIALS:-/none}" || { say fatal "failed to load GCP credentials"; exit 1; }
  fi
  rm -rf "$dir/metadata.json" "$dir/auth"
  say info "Uninstallation complete!";;
*) exit 2;;
esac
"#;

/// `oc`'s stand-in: `adm release extract --command=openshift-install --to DIR IMAGE` writes the installer's stand-in
/// (which follows it, as a here-document).
const OC: &str = r#"#!/bin/bash
to=""
while [ $# -gt 0 ]; do
  case "$1" in --to) to=$2; shift;; --command=*) [ "${1#--command=}" = openshift-install ] || exit 2;; esac
  shift
done
[ -n "$to" ] || exit 2
cat > "$to/openshift-install" <<'STAND_IN'
"#;

/// Each job a run of the buildspec's phases with bash, as CodeBuild runs them in a fresh container: a command that
/// fails ends its phase and the build (an install phase's failure skips the rest; post_build runs after a failed
/// build phase). The AWS CLI signs as the jobs' role, against the emulator.
struct BuildspecRuns {
    phases: Vec<(String, Vec<String>)>,
    root: std::path::PathBuf,
    env: Mutex<Vec<(String, String)>>,
    bucket: String,
    outcomes: Mutex<std::collections::HashMap<String, JobState>>,
    ran: Mutex<Vec<String>>,
    /// Every command's output, as CodeBuild sends it to the jobs' log group.
    log: Mutex<String>,
}

impl BuildspecRuns {
    fn run(&self, spec: &JobSpec) -> JobState {
        // The container's /tmp/apiary, under this test's own directory (a build starts with nothing there).
        let container = self.root.join("container");
        let _ = std::fs::remove_dir_all(&container);
        std::fs::create_dir_all(container.join("home")).expect("the container");
        let tmp = container.join("tmp-apiary").display().to_string();
        let mut failed: Option<String> = None;
        for (phase, commands) in &self.phases {
            if failed.is_some() && phase != "post_build" {
                continue;
            }
            for command in commands {
                let out = std::process::Command::new("bash")
                    .arg("-c")
                    .arg(command.replace("/tmp/apiary", &tmp))
                    .env_clear()
                    .envs(self.env.lock().expect("env").clone())
                    .envs(apiary_installer::aws::job_environment(spec, &self.bucket))
                    .env("HOME", container.join("home"))
                    .output()
                    .expect("bash");
                let mut log = self.log.lock().expect("log");
                log.push_str(&String::from_utf8_lossy(&out.stdout));
                log.push_str(&String::from_utf8_lossy(&out.stderr));
                drop(log);
                if !out.status.success() {
                    let why = format!(
                        "{}: COMMAND_EXECUTION_ERROR: exit status {}: {}",
                        phase.to_uppercase(),
                        out.status.code().unwrap_or(-1),
                        String::from_utf8_lossy(&out.stderr).trim()
                    );
                    failed.get_or_insert(why);
                    break;
                }
            }
            if failed.is_some() && phase == "install" {
                break;
            }
        }
        failed.map_or(JobState::Succeeded, JobState::Failed)
    }
}

#[async_trait::async_trait]
impl Jobs for BuildspecRuns {
    async fn start(&self, spec: &JobSpec) -> apiary_ports::Result<String> {
        let id = format!("{}:{}", spec.cluster, spec.run);
        let outcome = self.run(spec);
        self.ran.lock().expect("ran").push(format!("{} {:?}: {outcome:?}", spec.run, spec.kind));
        self.outcomes.lock().expect("outcomes").insert(id.clone(), outcome);
        Ok(id)
    }

    async fn state(&self, id: &str) -> apiary_ports::Result<JobState> {
        let outcomes = self.outcomes.lock().expect("outcomes");
        Ok(outcomes.get(id).cloned().unwrap_or_else(|| JobState::Failed(format!("build {id} is not known"))))
    }

    async fn stop(&self, _: &str) -> apiary_ports::Result<()> {
        Ok(())
    }
}

fn aws_cli() -> std::path::PathBuf {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("the repository").to_owned();
    let cli = std::env::var_os("APIARY_AWS_CLI")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| root.join(".venv-awscli/bin/aws"));
    assert!(
        cli.exists(),
        "{} is missing: the buildspec's test runs the AWS CLI it runs in CodeBuild (`make .venv-awscli/.installed` \
         installs the pinned one, or set APIARY_AWS_CLI)",
        cli.display()
    );
    cli
}

/// The buildspec as written, run with bash and the real AWS CLI against the emulator's S3 as the jobs' role, with
/// stand-ins for oc and openshift-install, behind the installer's own service: an install, a failed bootstrap (its
/// clean-up destroy, and the next attempt), a removal.
#[tokio::test]
async fn the_buildspec_installs_fails_and_destroys_as_written_with_the_jobs_role() {
    let cli = aws_cli();
    let (operator, env, settings) = installer_stack().await;
    let bucket = settings.bucket.clone();
    let root = std::env::temp_dir().join(unique("buildspec"));
    std::fs::create_dir_all(root.join("oc/bin")).expect("root");
    let oc = format!("{OC}{OPENSHIFT_INSTALL}STAND_IN\nchmod +x \"$to/openshift-install\"\n");
    std::fs::write(root.join("oc/bin/oc"), oc).expect("stand-in");
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(root.join("oc/bin/oc"), std::fs::Permissions::from_mode(0o755)).expect("mode");
    }
    // The client's tarball holds `oc` at its top, as mirror.openshift.com's does.
    let tarball = root.join("oc/openshift-client-linux.tar.gz");
    let tar = std::process::Command::new("tar")
        .args(["-czf", &tarball.display().to_string(), "-C", &root.join("oc/bin").display().to_string(), "oc"])
        .status()
        .expect("tar");
    assert!(tar.success());

    let assumed = aws_sdk_sts::Client::new(&operator)
        .assume_role()
        .role_arn(&env["APIARY_INSTALLER_JOBS_ROLE_ARN"])
        .role_session_name("AWSCodeBuild-job")
        .send()
        .await
        .expect("the jobs' role, as CodeBuild assumes it");
    let creds = assumed.credentials.expect("credentials");
    let path = format!("{}:/usr/bin:/bin", cli.parent().expect("bin").display());
    let build_env: Vec<(String, String)> = [
        ("PATH", path.as_str()),
        ("AWS_ACCESS_KEY_ID", creds.access_key_id()),
        ("AWS_SECRET_ACCESS_KEY", creds.secret_access_key()),
        ("AWS_SESSION_TOKEN", creds.session_token()),
        ("AWS_DEFAULT_REGION", "us-east-1"),
        ("AWS_ENDPOINT_URL", &std::env::var("AWS_ENDPOINT_URL").expect("the emulator")),
        // The project's environment (infra/installer.yaml).
        ("APIARY_KMS_KEY", settings.kms_key.as_deref().expect("the stack's key")),
        ("APIARY_OC_URL", &format!("file://{}", tarball.display())),
        ("APIARY_OC_SHA256", &sha256(&tarball)),
        ("STAND_IN_FAIL", &root.join("fail-bootstrap").display().to_string()),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();

    let function = apiary_aws::assume(&operator, &env["APIARY_INSTALLER_ROLE_ARN"], "installer").await;
    let mut installer = apiary_installer::aws::installer(&function, &settings).await.expect("the signing key, read");
    let runs = std::sync::Arc::new(BuildspecRuns {
        phases: buildspec(),
        root: root.clone(),
        env: Mutex::new(build_env),
        bucket: bucket.clone(),
        outcomes: Mutex::default(),
        ran: Mutex::default(),
        log: Mutex::default(),
    });
    installer.jobs = runs.clone();
    let put = |attempt: u32| {
        json!({
            "pool": "ocp", "clusterId": "ci-7", "clusterName": "ci-7", "baseDomain": "ci.example.com",
            "labels": {}, "parameters": {}, "attempt": attempt,
        })
    };

    // A failed bootstrap: the build fails, its directory still goes back, the clean-up destroy runs from its
    // metadata.json, and the failure says the log's words.
    std::fs::write(root.join("fail-bootstrap"), "").expect("fault");
    signed(&installer, "PUT", "/clusters/ci-7", put(1)).await;
    let (status, body) = signed(&installer, "GET", "/clusters/ci-7", Value::Null).await;
    assert_eq!((status, body["state"].as_str()), (409, Some("Failed")), "{body}");
    assert!(body["message"].as_str().is_some_and(|m| m.contains("Bootstrap failed to complete")), "{body}");

    // The next attempt installs, and the credentials the stand-in left are stored.
    std::fs::remove_file(root.join("fail-bootstrap")).expect("fault");
    signed(&installer, "PUT", "/clusters/ci-7", put(2)).await;
    let (status, body) = signed(&installer, "GET", "/clusters/ci-7", Value::Null).await;
    assert_eq!((status, body["state"].as_str()), (200, Some("Ready")), "{body}; ran {:?}", runs.ran.lock());
    assert_eq!(body["infraId"], "ci-7-x7k2p");
    let dirs = S3Dirs::new(&operator, &bucket, None);
    assert_eq!(dirs.read("ci-7", "install-config.yaml").await.expect("read"), None, "consumed, and synced as gone");
    // The pool's manifest went into openshift/ after openshift-install's own, before the cluster was made.
    let consumed = dirs.read("ci-7", ".consumed-manifests").await.expect("read").expect("the manifests consumed");
    assert_eq!(
        String::from_utf8_lossy(&consumed),
        "99_apiary-00-configmap-pool-of-ci-7.yaml\nopenshift-install-manifests.yaml\n"
    );
    let head =
        aws_sdk_s3::Client::from_conf(aws_sdk_s3::config::Builder::from(&operator).force_path_style(true).build())
            .head_object()
            .bucket(&bucket)
            .key("clusters/ci-7/auth/kubeconfig")
            .send()
            .await
            .expect("synced back");
    assert_eq!(head.ssekms_key_id(), settings.kms_key.as_deref(), "written with the installer's key");

    // The removal: a destroy from the metadata, then nothing left.
    let mut removal = (0, Value::Null);
    for _ in 0..5 {
        removal = signed(&installer, "DELETE", "/clusters/ci-7", Value::Null).await;
        if removal.0 != 202 {
            break;
        }
    }
    assert_eq!(removal.0, 404, "{}", removal.1);
    assert_eq!(dirs.read("ci-7", "metadata.json").await.expect("read"), None);
    let ran = runs.ran.lock().expect("ran").clone();
    assert_eq!(ran.len(), 4, "an install, its clean-up, an install, a destroy: {ran:?}");

    // A cluster on GCP: its jobs take the pool's key out of the directory and give it to openshift-install, so
    // it is never synced back; its destroy has it too.
    let gcp = json!({"pool": "ocp", "clusterId": "ci-9", "clusterName": "ci-9", "baseDomain": "ci.example.com",
                     "attempt": 1, "installConfigTemplate": "ocp-gcp"});
    signed(&installer, "PUT", "/clusters/ci-9", gcp).await;
    let (status, body) = signed(&installer, "GET", "/clusters/ci-9", Value::Null).await;
    assert_eq!((status, body["state"].as_str()), (200, Some("Ready")), "{body}; ran {:?}", runs.ran.lock());
    assert_eq!(
        dirs.read("ci-9", ".apiary/gcp-credentials.json").await.expect("read"),
        None,
        "the key left with the job"
    );
    let mut removal = (0, Value::Null);
    for _ in 0..5 {
        removal = signed(&installer, "DELETE", "/clusters/ci-9", Value::Null).await;
        if removal.0 != 202 {
            break;
        }
    }
    assert_eq!(removal.0, 404, "the destroy had the key: {}; ran {:?}", removal.1, runs.ran.lock());
    assert!(ran[0].contains("Install: Failed") && ran[0].contains("BUILD"), "{ran:?}");
    assert!(ran[1..].iter().all(|r| r.ends_with("Succeeded")), "{ran:?}");

    // The kubeadmin password openshift-install told reached the job's log only redacted.
    let log = runs.log.lock().expect("log").clone();
    assert!(log.contains("Install complete!") && log.contains("password: \\\"(redacted)"), "{log}");
    assert!(!log.contains("aaaaa-bbbbb-ccccc-ddddd"), "the password is in the job's log: {log}");

    // An oc that is not the file pinned: the job fails before anything runs, saying so.
    runs.env
        .lock()
        .expect("env")
        .iter_mut()
        .filter(|(k, _)| k == "APIARY_OC_SHA256")
        .for_each(|(_, v)| *v = "0".repeat(64));
    signed(
        &installer,
        "PUT",
        "/clusters/ci-8",
        json!({"pool": "ocp", "clusterId": "ci-8", "clusterName": "ci-8",
        "baseDomain": "ci.example.com", "attempt": 1}),
    )
    .await;
    let (status, body) = signed(&installer, "GET", "/clusters/ci-8", Value::Null).await;
    assert_eq!((status, body["state"].as_str()), (409, Some("Failed")), "{body}");
    let message = body["message"].as_str().unwrap_or_default();
    assert!(message.contains("INSTALL") && message.contains("checksum did NOT match"), "{message}");
    let last = runs.ran.lock().expect("ran").last().cloned().unwrap_or_default();
    assert!(last.contains("Install: Failed") && last.contains("INSTALL"), "{last}");
    assert_eq!(dirs.read("ci-8", "metadata.json").await.expect("read"), None, "openshift-install never ran");
}

/// The SHA-256 of the file at `path`, as sha256sum prints it.
fn sha256(path: &std::path::Path) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(std::fs::read(path).expect("file")).iter().map(|b| format!("{b:02x}")).collect()
}
