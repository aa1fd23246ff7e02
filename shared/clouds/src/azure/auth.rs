//! Entra ID client-credentials tokens for Azure Resource Manager: the service principal's id and secret from
//! Secrets Manager, exchanged at `{authority}/{tenant}/oauth2/v2.0/token` for a token of scope
//! `{ARM}/.default`, cached until a minute before it expires.

use std::time::Duration;

use apiary_ports::{Error, Result};
use serde::Deserialize;

use crate::http::Http;
use crate::tokens::TokenCache;

/// A service principal's credentials, as Secrets Manager holds them: `{"clientId", "clientSecret"}`, or the
/// `{"appId", "password"}` that `az ad sp create-for-rbac` prints.
#[derive(Clone, Deserialize)]
pub struct ClientSecret {
    /// The application (client) id.
    #[serde(alias = "appId")]
    pub client_id: String,
    /// The client secret.
    #[serde(alias = "password")]
    pub client_secret: String,
}

impl std::fmt::Debug for ClientSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientSecret").field("client_id", &self.client_id).finish_non_exhaustive()
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Fields {
    #[serde(alias = "appId")]
    client_id: Option<String>,
    #[serde(alias = "password")]
    client_secret: Option<String>,
}

impl ClientSecret {
    /// Reads the credentials from the secret's text; errors name the secret and the missing field, never a value.
    pub fn parse(arn: &str, text: &str) -> Result<Self> {
        let bad = |why: &str| {
            Error::service(
                "azure:credentials",
                format!("secret {arn} does not hold a service principal ({{\"clientId\", \"clientSecret\"}}): {why}"),
                false,
            )
        };
        let fields: Fields = serde_json::from_str(text)
            .map_err(|e| bad(if e.is_data() { "a field has the wrong type" } else { "not JSON" }))?;
        match (fields.client_id.filter(|v| !v.is_empty()), fields.client_secret.filter(|v| !v.is_empty())) {
            (Some(client_id), Some(client_secret)) => Ok(Self { client_id, client_secret }),
            (None, _) => Err(bad("clientId is missing")),
            (_, None) => Err(bad("clientSecret is missing")),
        }
    }
}

#[derive(Deserialize)]
struct TokenAnswer {
    access_token: String,
    #[serde(default = "an_hour")]
    expires_in: u64,
}

fn an_hour() -> u64 {
    3600
}

/// Where a token comes from and what it is for.
#[derive(Debug, Clone, Copy)]
pub struct Issuer<'a> {
    /// Entra ID's root (`https://login.microsoftonline.com`).
    pub authority: &'a str,
    /// The tenant.
    pub tenant: &'a str,
    /// The API the token is for (ARM's root): the scope is `{resource}/.default`.
    pub resource: &'a str,
}

/// The cache key of the principal's tokens.
pub fn cache_key(issuer: Issuer<'_>, secret: &ClientSecret) -> String {
    format!("{} {} {} {}", issuer.authority, issuer.tenant, secret.client_id, issuer.resource)
}

/// A token for `secret` from `cache` while it has more than a minute left, else from the tenant's token endpoint.
pub async fn token(cache: &TokenCache, http: &Http, issuer: Issuer<'_>, secret: &ClientSecret) -> Result<String> {
    let id = cache_key(issuer, secret);
    if let Some(token) = cache.get(&id) {
        return Ok(token);
    }
    let url = format!("{}/{}/oauth2/v2.0/token", issuer.authority, crate::http::escape(issuer.tenant));
    let scope = format!("{}/.default", issuer.resource);
    let form = [
        ("grant_type", "client_credentials"),
        ("client_id", secret.client_id.as_str()),
        ("client_secret", secret.client_secret.as_str()),
        ("scope", scope.as_str()),
    ];
    let answer = http.send("azure:token", |c| c.post(&url).form(&form)).await?;
    if !answer.is_success() {
        return Err(Error::service(
            "azure:token",
            format!(
                "tenant {} refused the service principal {}: {} {}",
                issuer.tenant,
                secret.client_id,
                answer.status,
                answer.text()
            ),
            false,
        ));
    }
    let t: TokenAnswer = answer.json("azure:token")?;
    cache.put(&id, &t.access_token, Duration::from_secs(t.expires_in));
    Ok(t.access_token)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_are_read_in_either_shape_and_never_shown() {
        let a = ClientSecret::parse("arn:x", r#"{"clientId": "app", "clientSecret": "s3cret"}"#).expect("camel");
        let b = ClientSecret::parse("arn:x", r#"{"appId": "app", "password": "s3cret", "tenant": "t"}"#).expect("cli");
        assert_eq!((a.client_id.as_str(), b.client_secret.as_str()), ("app", "s3cret"));
        assert!(!format!("{a:?}").contains("s3cret"));
        let e = ClientSecret::parse("arn:x", r#"{"clientId": "app"}"#).expect_err("no secret").to_string();
        assert!(e.contains("arn:x") && e.contains("clientSecret is missing"), "{e}");
        let e =
            ClientSecret::parse("arn:x", r#"{"clientId": 1, "clientSecret": "s3cret"}"#).expect_err("type").to_string();
        assert!(!e.contains("s3cret"), "{e}");
    }
}
