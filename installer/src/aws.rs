//! The installer's ports on AWS.
//!
//! - [`SecretsVault`]: a cluster's credentials in Secrets Manager, tagged for its pool.

use apiary_planner::secret_tags::{APIARY_TAG, POOLS_TAG};
use apiary_ports::{Error, Result};
use async_trait::async_trait;
use aws_sdk_secretsmanager::types::Tag;
use aws_sdk_secretsmanager::Client;

use crate::ports::Vault;

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
