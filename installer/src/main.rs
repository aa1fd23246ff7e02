//! The `apiary-installer` Lambda function, behind its function URL: Apiary's webhook requests in, the contract's
//! answers out (`infra/installer.yaml` deploys it). Its settings come from the environment:
//!
//! - `APIARY_INSTALLER_TABLE`: the records' DynamoDB table.
//! - `APIARY_INSTALLER_BUCKET`: the bucket of install directories and pools' settings;
//!   `APIARY_INSTALLER_KMS_KEY` the KMS key its objects are encrypted with.
//! - `APIARY_INSTALLER_PROJECT`: the CodeBuild project the jobs are builds of.
//! - `APIARY_INSTALLER_KEYS`: the ARNs (comma-separated) of the secrets holding the signing keys a request may be
//!   signed with, the one the pools name and, during a rotation, the next.

use std::sync::Arc;

use anyhow::Context;
use apiary_aws::secrets::SecretsManager;
use apiary_clouds::secrets::SecretCache;
use apiary_installer::aws::{CodeBuildJobs, DynamoRecords, S3Dirs, S3Pools, SecretsVault};
use apiary_installer::service::Installer;
use apiary_ports::secrets::Secrets;
use bytes::Bytes;
use lambda_http::{service_fn, Body, Request, Response};

fn setting(name: &str) -> anyhow::Result<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty()).with_context(|| format!("{name} is not set"))
}

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    apiary_aws::logging::init("installer");
    let sdk = apiary_aws::load_sdk_config().await;
    let bucket = setting("APIARY_INSTALLER_BUCKET")?;
    let kms = std::env::var("APIARY_INSTALLER_KMS_KEY").ok().filter(|k| !k.is_empty());
    let dirs = S3Dirs::new(&sdk, &bucket, kms);
    let secrets = SecretsManager::new(&sdk);
    let mut keys = Vec::new();
    for arn in setting("APIARY_INSTALLER_KEYS")?.split(',').map(str::trim).filter(|a| !a.is_empty()) {
        let key = secrets.secret(arn).await.with_context(|| format!("the signing key {arn}"))?;
        keys.push(key.expose().trim().to_owned());
    }
    let reader: Arc<dyn Secrets> = Arc::new(secrets);
    let installer = Installer {
        pools: Arc::new(S3Pools(dirs.clone())),
        records: Arc::new(DynamoRecords::new(&sdk, setting("APIARY_INSTALLER_TABLE")?)),
        dirs: Arc::new(dirs),
        jobs: Arc::new(CodeBuildJobs::new(&sdk, setting("APIARY_INSTALLER_PROJECT")?, &bucket)),
        vault: Arc::new(SecretsVault::new(&sdk)),
        secrets: Arc::new(SecretCache::new(reader)),
        keys,
    };
    lambda_http::run(service_fn(|req: Request| {
        let installer = installer.clone();
        async move {
            let (parts, body) = req.into_parts();
            let body = match body {
                Body::Empty => Bytes::new(),
                Body::Text(text) => Bytes::from(text),
                Body::Binary(bytes) => Bytes::from(bytes),
            };
            let (parts, body) = installer.handle(http::Request::from_parts(parts, body)).await.into_parts();
            Ok::<_, std::convert::Infallible>(Response::from_parts(parts, Body::Binary(body.to_vec())))
        }
    }))
    .await
}
