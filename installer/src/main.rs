//! The `apiary-installer` Lambda function, behind its function URL: Apiary's webhook requests in, the contract's
//! answers out (`infra/installer.yaml` deploys it). Its settings come from the environment:
//!
//! - `APIARY_INSTALLER_TABLE`: the records' DynamoDB table.
//! - `APIARY_INSTALLER_BUCKET`: the bucket of install directories and pools' settings;
//!   `APIARY_INSTALLER_KMS_KEY` the KMS key its objects are encrypted with.
//! - `APIARY_INSTALLER_PROJECT`: the CodeBuild project the jobs are builds of.
//! - `APIARY_INSTALLER_KEYS`: the ARNs (comma-separated) of the secrets holding the signing keys a request may be
//!   signed with, the one the pools name and, during a rotation, the next.

use apiary_installer::aws::Settings;
use bytes::Bytes;
use lambda_http::{service_fn, Body, Request, Response};

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    apiary_aws::logging::init("installer");
    let sdk = apiary_aws::load_sdk_config().await;
    let settings = Settings::from_env(|name| std::env::var(name).ok())?;
    let installer = apiary_installer::aws::installer(&sdk, &settings).await?;
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
