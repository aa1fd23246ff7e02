//! The installer's AWS adapters against the emulator (`AWS_ENDPOINT_URL`), as far as it emulates: the records'
//! conditional writes and the pool index, the install directories and pools' settings in S3, and the jobs as
//! CodeBuild builds (the emulator runs no buildspec: it accepts a build and reports it done a look later). With
//! `APIARY_WIRE_OUT` set to a directory, every CodeBuild request is written there as `codebuild.json`, which
//! `tests/conformance_codebuild.py` (`make conformance`) holds against botocore's model of the service.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use apiary_installer::aws::{CodeBuildJobs, DynamoRecords, S3Dirs, S3Pools, POOL_INDEX};
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
    assert!(why.contains("pools/bad.json") && why.contains("installConfig"), "{why}");
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
        (Some(150), Some("ci-1-1"))
    );
    if let Some(dir) = std::env::var_os("APIARY_WIRE_OUT") {
        let path = std::path::Path::new(&dir).join("codebuild.json");
        std::fs::write(path, serde_json::to_vec_pretty(&sent).expect("json")).expect("written");
    }
}
