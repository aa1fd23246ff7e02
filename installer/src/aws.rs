//! The installer's ports on AWS.
//!
//! - [`SecretsVault`]: a cluster's credentials in Secrets Manager, tagged for its pool.
//! - [`DynamoRecords`]: the records in a DynamoDB table of the installer's own (`id` its key, a `pool` index for
//!   the reaper's list), each write conditional on the revision read.
//! - [`S3Dirs`] and [`S3Pools`]: the install directories (`clusters/<id>/…`) and the pools' settings
//!   (`pools/<pool>.json`) in the installer's bucket, every object written encrypted with its KMS key.
//! - [`CodeBuildJobs`]: each job a build of the installer's CodeBuild project, told what to run by its
//!   environment (`infra/installer.yaml` holds the buildspec that syncs the directory, runs openshift-install and
//!   syncs it back).

use std::collections::HashMap;

use apiary_planner::secret_tags::{APIARY_TAG, POOLS_TAG};
use apiary_ports::{Error, Result};
use async_trait::async_trait;
use aws_sdk_codebuild::types::{EnvironmentVariable, EnvironmentVariableType, StatusType};
use aws_sdk_dynamodb::types::AttributeValue;
use aws_sdk_secretsmanager::types::Tag;
use aws_sdk_secretsmanager::Client;

use crate::model::{PoolSettings, Record};
use crate::ports::{Dirs, JobSpec, JobState, Jobs, Pools, Records, Vault};

/// The function's settings, from its environment (`infra/installer.yaml` sets them).
#[derive(Debug, Clone)]
pub struct Settings {
    /// `APIARY_INSTALLER_TABLE`: the records' DynamoDB table.
    pub table: String,
    /// `APIARY_INSTALLER_BUCKET`: the bucket of install directories and pools' settings.
    pub bucket: String,
    /// `APIARY_INSTALLER_KMS_KEY`: the KMS key its objects are encrypted with (else the bucket's default).
    pub kms_key: Option<String>,
    /// `APIARY_INSTALLER_PROJECT`: the CodeBuild project the jobs are builds of.
    pub project: String,
    /// `APIARY_INSTALLER_KEYS`: the ARNs of the secrets holding the signing keys a request may be signed with.
    pub key_arns: Vec<String>,
}

impl Settings {
    /// The settings from the environment `var` reads; names the first one missing.
    pub fn from_env(var: impl Fn(&str) -> Option<String>) -> Result<Self> {
        let var = |name: &str| var(name).filter(|v| !v.trim().is_empty());
        let required = |name: &str| var(name).ok_or_else(|| Error::Config(format!("{name} is not set")));
        let keys = required("APIARY_INSTALLER_KEYS")?;
        Ok(Self {
            table: required("APIARY_INSTALLER_TABLE")?,
            bucket: required("APIARY_INSTALLER_BUCKET")?,
            kms_key: var("APIARY_INSTALLER_KMS_KEY"),
            project: required("APIARY_INSTALLER_PROJECT")?,
            key_arns: keys.split(',').map(str::trim).filter(|a| !a.is_empty()).map(str::to_owned).collect(),
        })
    }
}

/// The installer on AWS, as its function runs it: every port an adapter of this module, with `sdk`'s credentials
/// (the function's role). Reads the signing keys once.
pub async fn installer(sdk: &aws_config::SdkConfig, settings: &Settings) -> Result<crate::service::Installer> {
    use apiary_ports::secrets::Secrets;
    let dirs = S3Dirs::new(sdk, &settings.bucket, settings.kms_key.clone());
    let secrets = apiary_aws::secrets::SecretsManager::new(sdk);
    let mut keys = Vec::new();
    for arn in &settings.key_arns {
        let key = secrets.secret(arn).await.map_err(|e| Error::Config(format!("the signing key {arn}: {e}")))?;
        keys.push(key.expose().trim().to_owned());
    }
    let reader: std::sync::Arc<dyn Secrets> = std::sync::Arc::new(secrets);
    Ok(crate::service::Installer {
        pools: std::sync::Arc::new(S3Pools(dirs.clone())),
        records: std::sync::Arc::new(DynamoRecords::new(sdk, &settings.table)),
        replays: std::sync::Arc::new(DynamoReplays::new(sdk, &settings.table)),
        dirs: std::sync::Arc::new(dirs),
        jobs: std::sync::Arc::new(CodeBuildJobs::new(sdk, &settings.project, &settings.bucket)),
        vault: std::sync::Arc::new(SecretsVault::new(sdk)),
        secrets: std::sync::Arc::new(apiary_clouds::secrets::SecretCache::new(reader)),
        keys,
        clock: std::sync::Arc::new(apiary_ports::clock::SystemClock),
    })
}

/// Secrets Manager, for the secrets the installer stores.
#[derive(Clone)]
pub struct SecretsVault {
    client: Client,
}

impl SecretsVault {
    /// Stores secrets with `sdk`'s configuration.
    pub fn new(sdk: &aws_config::SdkConfig) -> Self {
        Self { client: Client::new(sdk) }
    }
}

#[async_trait]
impl Vault for SecretsVault {
    async fn store(&self, name: &str, value: &str, pool: &str) -> Result<String> {
        let tags =
            [Tag::builder().key(APIARY_TAG).value("true").build(), Tag::builder().key(POOLS_TAG).value(pool).build()];
        let created =
            self.client.create_secret().name(name).secret_string(value).set_tags(Some(tags.to_vec())).send().await;
        let arn = match created {
            Ok(out) => out.arn,
            // Stored before (a look that failed after storing): the value is replaced, the tags set again.
            Err(e) if e.as_service_error().is_some_and(|s| s.is_resource_exists_exception()) => {
                let out = self
                    .client
                    .put_secret_value()
                    .secret_id(name)
                    .secret_string(value)
                    .send()
                    .await
                    .map_err(|e| apiary_aws::error::aws("secretsmanager:PutSecretValue", e))?;
                let arn = out.arn.unwrap_or_else(|| name.to_owned());
                self.client
                    .tag_resource()
                    .secret_id(&arn)
                    .set_tags(Some(tags.to_vec()))
                    .send()
                    .await
                    .map_err(|e| apiary_aws::error::aws("secretsmanager:TagResource", e))?;
                Some(arn)
            }
            Err(e) => return Err(apiary_aws::error::aws("secretsmanager:CreateSecret", e)),
        };
        arn.ok_or_else(|| Error::service("secretsmanager:CreateSecret", format!("{name} has no ARN"), false))
    }

    async fn remove(&self, arn: &str) -> Result<()> {
        let deleted = self.client.delete_secret().secret_id(arn).force_delete_without_recovery(true).send().await;
        match deleted {
            Ok(_) => Ok(()),
            Err(e) if e.as_service_error().is_some_and(|s| s.is_resource_not_found_exception()) => Ok(()),
            Err(e) => Err(apiary_aws::error::aws("secretsmanager:DeleteSecret", e)),
        }
    }
}

/// The installer's records in DynamoDB: one item per cluster, `{id, pool, revision, record}` with `record` the
/// record's JSON (it holds no secret), and a global index `pool` (`pool`, `id`) for the reaper's list.
#[derive(Clone)]
pub struct DynamoRecords {
    client: aws_sdk_dynamodb::Client,
    table: String,
}

/// The accepted requests in the records' table: an item `{id: "replay#<webhook-id>", digest, expires}` (no `pool`,
/// so never in the pool index), written only if there is none, it is for the same request, or it expired; the
/// table's time to live (`expires`) removes it later.
#[derive(Clone)]
pub struct DynamoReplays {
    client: aws_sdk_dynamodb::Client,
    table: String,
}

impl DynamoReplays {
    /// The accepted requests in `table`.
    pub fn new(sdk: &aws_config::SdkConfig, table: impl Into<String>) -> Self {
        Self { client: aws_sdk_dynamodb::Client::new(sdk), table: table.into() }
    }
}

#[async_trait]
impl crate::ports::Replays for DynamoReplays {
    async fn accept(&self, id: &str, digest: &str, now: i64, expires: i64) -> Result<bool> {
        let put = self
            .client
            .put_item()
            .table_name(&self.table)
            .item("id", AttributeValue::S(format!("replay#{id}")))
            .item("digest", AttributeValue::S(digest.to_owned()))
            .item("expires", AttributeValue::N(expires.to_string()))
            .condition_expression("attribute_not_exists(id) OR #digest = :digest OR #expires < :now")
            .expression_attribute_names("#digest", "digest")
            .expression_attribute_names("#expires", "expires")
            .expression_attribute_values(":digest", AttributeValue::S(digest.to_owned()))
            .expression_attribute_values(":now", AttributeValue::N(now.to_string()))
            .send()
            .await;
        match put {
            Ok(_) => Ok(true),
            Err(e) if e.as_service_error().is_some_and(lost) => Ok(false),
            Err(e) => Err(apiary_aws::error::aws("dynamodb:PutItem", e)),
        }
    }
}

/// How long a removed cluster's tombstone is kept: the longest an SQS queue keeps a message, and a day.
pub const TOMBSTONE_SECONDS: i64 = 15 * 24 * 3600;

/// The pool index's name.
pub const POOL_INDEX: &str = "pool";

impl DynamoRecords {
    /// The records in `table`.
    pub fn new(sdk: &aws_config::SdkConfig, table: impl Into<String>) -> Self {
        Self { client: aws_sdk_dynamodb::Client::new(sdk), table: table.into() }
    }
}

fn decode(item: &HashMap<String, AttributeValue>) -> Result<Record> {
    let text = item
        .get("record")
        .and_then(|v| v.as_s().ok())
        .ok_or_else(|| Error::service("dynamodb:GetItem", "an installer item without its record", false))?;
    Ok(serde_json::from_str(text)?)
}

fn lost<E: aws_sdk_dynamodb::error::ProvideErrorMetadata>(e: &E) -> bool {
    e.code() == Some("ConditionalCheckFailedException")
}

#[async_trait]
impl Records for DynamoRecords {
    async fn get(&self, id: &str) -> Result<Option<Record>> {
        const OP: &str = "dynamodb:GetItem";
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .key("id", AttributeValue::S(id.to_owned()))
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| apiary_aws::error::aws(OP, e))?;
        out.item.as_ref().map(decode).transpose()
    }

    async fn put(&self, record: &Record, expected: Option<u64>) -> Result<bool> {
        const OP: &str = "dynamodb:PutItem";
        let mut put = self
            .client
            .put_item()
            .table_name(&self.table)
            .item("id", AttributeValue::S(record.id.clone()))
            .item("pool", AttributeValue::S(record.pool.clone()))
            .item("revision", AttributeValue::N(record.revision.to_string()))
            .item("record", AttributeValue::S(serde_json::to_string(record)?));
        if record.phase == crate::model::Phase::Removed {
            // A removal's tombstone outlives every delayed request Apiary could still send (a queue keeps a
            // message 14 days at most); the table's time to live removes it then.
            let expires = chrono::Utc::now().timestamp() + TOMBSTONE_SECONDS;
            put = put.item("expires", AttributeValue::N(expires.to_string()));
        }
        put = match expected {
            None => put.condition_expression("attribute_not_exists(id)"),
            Some(revision) => put
                .condition_expression("revision = :expected")
                .expression_attribute_values(":expected", AttributeValue::N(revision.to_string())),
        };
        match put.send().await {
            Ok(_) => Ok(true),
            Err(e) if e.as_service_error().is_some_and(lost) => Ok(false),
            Err(e) => Err(apiary_aws::error::aws(OP, e)),
        }
    }

    async fn delete(&self, id: &str, expected: u64) -> Result<bool> {
        const OP: &str = "dynamodb:DeleteItem";
        let deleted = self
            .client
            .delete_item()
            .table_name(&self.table)
            .key("id", AttributeValue::S(id.to_owned()))
            .condition_expression("revision = :expected")
            .expression_attribute_values(":expected", AttributeValue::N(expected.to_string()))
            .send()
            .await;
        match deleted {
            Ok(_) => Ok(true),
            Err(e) if e.as_service_error().is_some_and(lost) => Ok(false),
            Err(e) => Err(apiary_aws::error::aws(OP, e)),
        }
    }

    async fn list(&self, pool: &str) -> Result<Vec<Record>> {
        const OP: &str = "dynamodb:Query";
        let mut out = Vec::new();
        let mut start: Option<HashMap<String, AttributeValue>> = None;
        loop {
            let page = self
                .client
                .query()
                .table_name(&self.table)
                .index_name(POOL_INDEX)
                .key_condition_expression("pool = :pool")
                .expression_attribute_values(":pool", AttributeValue::S(pool.to_owned()))
                .set_exclusive_start_key(start.take())
                .send()
                .await
                .map_err(|e| apiary_aws::error::aws(OP, e))?;
            for item in page.items() {
                out.push(decode(item)?);
            }
            match page.last_evaluated_key {
                Some(key) if !key.is_empty() => start = Some(key),
                _ => return Ok(out),
            }
        }
    }
}

/// The installer's bucket: install directories under `clusters/<id>/`, pools' settings under `pools/`.
#[derive(Clone)]
pub struct S3Dirs {
    client: aws_sdk_s3::Client,
    bucket: String,
    key: Option<String>,
}

impl S3Dirs {
    /// The directories in `bucket`, objects encrypted with the KMS key `key` (else the bucket's default).
    pub fn new(sdk: &aws_config::SdkConfig, bucket: impl Into<String>, key: Option<String>) -> Self {
        // Path-style addressing: a local emulator has no per-bucket host names.
        let config = aws_sdk_s3::config::Builder::from(sdk).force_path_style(true).build();
        Self { client: aws_sdk_s3::Client::from_conf(config), bucket: bucket.into(), key }
    }

    fn object(id: &str, file: &str) -> String {
        format!("clusters/{id}/{file}")
    }

    async fn get(&self, key: &str) -> Result<Option<Vec<u8>>> {
        const OP: &str = "s3:GetObject";
        match self.client.get_object().bucket(&self.bucket).key(key).send().await {
            Ok(out) => {
                let body = out.body.collect().await.map_err(|e| Error::service(OP, e.to_string(), true))?;
                Ok(Some(body.into_bytes().to_vec()))
            }
            Err(e) if e.as_service_error().is_some_and(|s| s.is_no_such_key()) => Ok(None),
            Err(e) => Err(apiary_aws::error::aws(OP, e)),
        }
    }

    /// Writes `bytes` at `key`, encrypted with the installer's KMS key.
    pub async fn put(&self, key: &str, bytes: &[u8]) -> Result<()> {
        let mut put = self
            .client
            .put_object()
            .bucket(&self.bucket)
            .key(key)
            .body(bytes.to_vec().into())
            .server_side_encryption(aws_sdk_s3::types::ServerSideEncryption::AwsKms);
        if let Some(kms) = &self.key {
            put = put.ssekms_key_id(kms);
        }
        put.send().await.map_err(|e| apiary_aws::error::aws("s3:PutObject", e))?;
        Ok(())
    }
}

#[async_trait]
impl Dirs for S3Dirs {
    async fn write(&self, id: &str, file: &str, bytes: &[u8]) -> Result<()> {
        self.put(&Self::object(id, file), bytes).await
    }

    async fn read(&self, id: &str, file: &str) -> Result<Option<Vec<u8>>> {
        self.get(&Self::object(id, file)).await
    }

    async fn clear(&self, id: &str) -> Result<()> {
        let prefix = format!("clusters/{id}/");
        loop {
            // Each page is deleted before the next is listed, so the listing starts over each time.
            let page = self
                .client
                .list_objects_v2()
                .bucket(&self.bucket)
                .prefix(&prefix)
                .send()
                .await
                .map_err(|e| apiary_aws::error::aws("s3:ListObjectsV2", e))?;
            let keys: Vec<aws_sdk_s3::types::ObjectIdentifier> = page
                .contents()
                .iter()
                .filter_map(|o| o.key())
                .filter_map(|k| aws_sdk_s3::types::ObjectIdentifier::builder().key(k).build().ok())
                .collect();
            if keys.is_empty() {
                return Ok(());
            }
            let delete = aws_sdk_s3::types::Delete::builder()
                .set_objects(Some(keys))
                .quiet(true)
                .build()
                .map_err(|e| apiary_aws::error::build("s3:DeleteObjects", e))?;
            self.client
                .delete_objects()
                .bucket(&self.bucket)
                .delete(delete)
                .send()
                .await
                .map_err(|e| apiary_aws::error::aws("s3:DeleteObjects", e))?;
        }
    }
}

/// The pools' settings in the installer's bucket, `pools/<pool>.json`, and the templates they name,
/// `templates/<name>.yaml`.
#[derive(Clone)]
pub struct S3Pools(pub S3Dirs);

#[async_trait]
impl Pools for S3Pools {
    async fn settings(&self, pool: &str) -> Result<Option<PoolSettings>> {
        crate::service::pool_name(pool).map_err(Error::Config)?;
        let key = format!("pools/{pool}.json");
        let Some(bytes) = self.0.get(&key).await? else { return Ok(None) };
        let bucket = &self.0.bucket;
        PoolSettings::parse(&bytes).map(Some).map_err(|why| Error::Config(format!("s3://{bucket}/{key}: {why}")))
    }

    async fn template(&self, name: &str) -> Result<Option<String>> {
        crate::config::template_name(name).map_err(Error::Config)?;
        let key = format!("templates/{name}.yaml");
        let Some(bytes) = self.0.get(&key).await? else { return Ok(None) };
        let bucket = &self.0.bucket;
        String::from_utf8(bytes).map(Some).map_err(|_| Error::Config(format!("s3://{bucket}/{key}: not UTF-8")))
    }
}

/// Jobs as builds of the installer's CodeBuild project.
#[derive(Clone)]
pub struct CodeBuildJobs {
    client: aws_sdk_codebuild::Client,
    project: String,
    bucket: String,
}

impl CodeBuildJobs {
    /// Builds of `project`, whose directories are in `bucket`.
    pub fn new(sdk: &aws_config::SdkConfig, project: impl Into<String>, bucket: impl Into<String>) -> Self {
        Self::with_client(aws_sdk_codebuild::Client::new(sdk), project, bucket)
    }

    /// The same through `client` (a test's, recording what it sends).
    pub fn with_client(
        client: aws_sdk_codebuild::Client,
        project: impl Into<String>,
        bucket: impl Into<String>,
    ) -> Self {
        Self { client, project: project.into(), bucket: bucket.into() }
    }
}

/// Where a build stands: a failed one says its status, and the phase that failed with what CodeBuild said of it
/// (the command's exit status).
pub fn build_state(build: &aws_sdk_codebuild::types::Build) -> JobState {
    let id = build.id().unwrap_or_default();
    match build.build_status() {
        None | Some(StatusType::InProgress) => JobState::Running,
        Some(StatusType::Succeeded) => JobState::Succeeded,
        Some(status) => {
            let phase = build.phases().iter().rev().find(|p| {
                p.phase_status().is_some_and(|s| !matches!(s, StatusType::Succeeded | StatusType::InProgress))
            });
            let said = phase
                .map(|p| {
                    let name = p.phase_type().map(|t| t.as_str().to_owned()).unwrap_or_default();
                    let context: Vec<&str> = p.contexts().iter().filter_map(|c| c.message()).collect();
                    format!(" in {name}: {}", context.join("; "))
                })
                .unwrap_or_default();
            JobState::Failed(format!("build {id} {}{said}", status.as_str()))
        }
    }
}

/// What the buildspec reads from a build's environment.
pub fn job_environment(spec: &JobSpec, bucket: &str) -> Vec<(&'static str, String)> {
    let mut env = vec![
        ("APIARY_ACTION", spec.kind.args("")[0].clone()),
        ("APIARY_CLUSTER", spec.cluster.clone()),
        ("APIARY_POOL", spec.pool.clone()),
        ("APIARY_INSTALL_DIR", format!("s3://{bucket}/clusters/{}/", spec.cluster)),
        ("OPENSHIFT_INSTALL_RELEASE_IMAGE_OVERRIDE", spec.release_image.clone()),
    ];
    if let Some(role) = &spec.role_arn {
        env.push(("APIARY_INSTALL_ROLE_ARN", role.clone()));
    }
    env
}

#[async_trait]
impl Jobs for CodeBuildJobs {
    async fn start(&self, spec: &JobSpec) -> Result<String> {
        const OP: &str = "codebuild:StartBuild";
        let env = job_environment(spec, &self.bucket)
            .into_iter()
            .map(|(name, value)| {
                EnvironmentVariable::builder()
                    .name(name)
                    .value(value)
                    .r#type(EnvironmentVariableType::Plaintext)
                    .build()
                    .map_err(|e| apiary_aws::error::build(OP, e))
            })
            .collect::<Result<Vec<_>>>()?;
        // CodeBuild's timeouts are whole minutes, 5 to 2160.
        let minutes = i32::try_from(spec.timeout.as_secs().div_ceil(60)).unwrap_or(2160).clamp(5, 2160);
        let out = self
            .client
            .start_build()
            .project_name(&self.project)
            .set_environment_variables_override(Some(env))
            .timeout_in_minutes_override(minutes)
            // The same job asked for twice (a retry after a lost answer) is one build.
            .idempotency_token(format!("{}-{}-{}", spec.cluster, spec.kind.name(), spec.run))
            .send()
            .await
            .map_err(|e| apiary_aws::error::aws(OP, e))?;
        out.build_value
            .and_then(|b| b.id)
            .ok_or_else(|| Error::service(OP, "the build was started without an id", false))
    }

    async fn state(&self, id: &str) -> Result<JobState> {
        const OP: &str = "codebuild:BatchGetBuilds";
        let out = self.client.batch_get_builds().ids(id).send().await.map_err(|e| apiary_aws::error::aws(OP, e))?;
        let Some(build) = out.builds().iter().find(|b| b.id() == Some(id)) else {
            return Ok(JobState::Failed(format!("build {id} is not known to CodeBuild")));
        };
        Ok(build_state(build))
    }

    async fn stop(&self, id: &str) -> Result<()> {
        const OP: &str = "codebuild:StopBuild";
        match self.client.stop_build().id(id).send().await {
            Ok(_) => Ok(()),
            // Gone or done already: nothing to stop.
            Err(e) if e.as_service_error().is_some_and(|s| s.is_resource_not_found_exception()) => Ok(()),
            Err(e) if e.as_service_error().is_some_and(|s| s.is_invalid_input_exception()) => Ok(()),
            Err(e) => Err(apiary_aws::error::aws(OP, e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_sdk_codebuild::types::{Build, BuildPhase, BuildPhaseType, PhaseContext};

    fn phase(kind: BuildPhaseType, status: StatusType, said: Option<&str>) -> BuildPhase {
        let mut p = BuildPhase::builder().phase_type(kind).phase_status(status);
        if let Some(said) = said {
            p = p.contexts(PhaseContext::builder().status_code("COMMAND_EXECUTION_ERROR").message(said).build());
        }
        p.build()
    }

    #[test]
    fn a_builds_status_is_the_jobs_and_a_failure_names_its_phase() {
        let build = |status: StatusType, phases: Vec<BuildPhase>| {
            Build::builder().id("apiary-installer:b1").build_status(status).set_phases(Some(phases)).build()
        };
        assert_eq!(build_state(&build(StatusType::InProgress, vec![])), JobState::Running);
        assert_eq!(build_state(&build(StatusType::Succeeded, vec![])), JobState::Succeeded);
        let failed = build(
            StatusType::Failed,
            vec![
                phase(BuildPhaseType::Install, StatusType::Succeeded, None),
                phase(
                    BuildPhaseType::Build,
                    StatusType::Failed,
                    Some("Error while executing command: openshift-install create cluster. Reason: exit status 5"),
                ),
                phase(BuildPhaseType::PostBuild, StatusType::Succeeded, None),
            ],
        );
        assert_eq!(
            build_state(&failed),
            JobState::Failed(
                "build apiary-installer:b1 FAILED in BUILD: Error while executing command: openshift-install create \
                 cluster. Reason: exit status 5"
                    .into()
            )
        );
        let timed_out = build(StatusType::TimedOut, vec![phase(BuildPhaseType::Build, StatusType::TimedOut, None)]);
        assert_eq!(build_state(&timed_out), JobState::Failed("build apiary-installer:b1 TIMED_OUT in BUILD: ".into()));
        let stopped = build(StatusType::Stopped, vec![]);
        assert_eq!(build_state(&stopped), JobState::Failed("build apiary-installer:b1 STOPPED".into()));
    }
}
