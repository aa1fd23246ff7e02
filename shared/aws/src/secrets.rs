//! The [`Secrets`] port on AWS Secrets Manager: `GetSecretValue` and `DescribeSecret` by ARN. Only the power
//! function builds it.

use std::collections::BTreeMap;

use apiary_planner::secret_tags::{APIARY_TAG, POOLS_TAG};
use apiary_ports::secrets::{Secret, Secrets};
use apiary_ports::{Error, Result};
use async_trait::async_trait;
use aws_sdk_secretsmanager::Client;

use crate::calls::count;

/// Secrets Manager.
#[derive(Clone)]
pub struct SecretsManager {
    client: Client,
}

impl SecretsManager {
    /// Reads secrets with `sdk`'s configuration (region, credentials, endpoint).
    pub fn new(sdk: &aws_config::SdkConfig) -> Self {
        Self { client: Client::new(sdk) }
    }

    /// Stores `value` as a new secret `name`, tagged `apiary=true` (the tag the power role's policy requires) and
    /// `apiary:pools` with `pools` (the pools that may use it), and answers its ARN. For the local stack and tests:
    /// the deployed functions never write secrets.
    pub async fn create(&self, name: &str, value: &str, pools: &[String]) -> Result<String> {
        const OP: &str = "secretsmanager:CreateSecret";
        count(OP);
        let tag = |k: &str, v: &str| aws_sdk_secretsmanager::types::Tag::builder().key(k).value(v).build();
        let out = self
            .client
            .create_secret()
            .name(name)
            .secret_string(value)
            .tags(tag(APIARY_TAG, "true"))
            .tags(tag(POOLS_TAG, &pools.join(" ")))
            .send()
            .await
            .map_err(|e| crate::error::aws(OP, e))?;
        out.arn.ok_or_else(|| Error::service(OP, format!("secret {name} was created without an ARN"), false))
    }
}

#[async_trait]
impl Secrets for SecretsManager {
    async fn secret(&self, arn: &str) -> Result<Secret> {
        const OP: &str = "secretsmanager:GetSecretValue";
        count(OP);
        let out = self.client.get_secret_value().secret_id(arn).send().await.map_err(|e| crate::error::aws(OP, e))?;
        out.secret_string
            .map(Secret::new)
            .ok_or_else(|| Error::service(OP, format!("secret {arn} holds no string (a binary secret?)"), false))
    }

    async fn tags(&self, arn: &str) -> Result<BTreeMap<String, String>> {
        const OP: &str = "secretsmanager:DescribeSecret";
        count(OP);
        let out = self.client.describe_secret().secret_id(arn).send().await.map_err(|e| crate::error::aws(OP, e))?;
        Ok(out
            .tags()
            .iter()
            .filter_map(|t| Some((t.key()?.to_owned(), t.value().unwrap_or_default().to_owned())))
            .collect())
    }
}
