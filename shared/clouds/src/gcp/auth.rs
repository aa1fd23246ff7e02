//! Service-account access tokens: an RS256 JWT signed with the key's private key, exchanged at the key's
//! `token_uri` (Google's OAuth 2.0 JWT bearer grant), cached until a minute before it expires.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use apiary_ports::{Error, Result};
use serde::{Deserialize, Serialize};

use crate::http::Http;
use crate::tokens::TokenCache;

/// The scope Apiary asks for: Compute Engine, read and write.
pub const SCOPE: &str = "https://www.googleapis.com/auth/compute";

/// The fields of a service account's JSON key Apiary uses.
#[derive(Clone, Deserialize)]
pub struct ServiceAccountKey {
    /// The account's email: the JWT's issuer.
    pub client_email: String,
    /// The private key, PKCS#8 PEM.
    pub private_key: String,
    /// The key's id: the JWT's `kid`.
    #[serde(default)]
    pub private_key_id: Option<String>,
    /// Where tokens are issued.
    pub token_uri: String,
}

impl std::fmt::Debug for ServiceAccountKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServiceAccountKey").field("client_email", &self.client_email).finish_non_exhaustive()
    }
}

impl ServiceAccountKey {
    /// Reads a key from the secret's text; the error names the secret, never its content.
    pub fn parse(arn: &str, text: &str) -> Result<Self> {
        serde_json::from_str(text).map_err(|e| {
            Error::service(
                "gcp:credentials",
                format!("secret {arn} is not a service-account JSON key: {}", without_position(&e)),
                false,
            )
        })
    }
}

/// What is wrong with a key, naming a missing field but never quoting the secret's content (serde_json's
/// messages for other errors may quote a value).
fn without_position(e: &serde_json::Error) -> String {
    let text = e.to_string();
    match text.split(" at line ").next() {
        Some(missing) if missing.starts_with("missing field") => missing.to_owned(),
        _ if e.is_data() => "a field has the wrong type".to_owned(),
        _ => "not JSON".to_owned(),
    }
}

#[derive(Serialize)]
struct Claims<'a> {
    iss: &'a str,
    scope: &'a str,
    aud: &'a str,
    iat: u64,
    exp: u64,
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

/// The cache key of `key`'s tokens: its account and the endpoint that issues them.
pub fn cache_key(key: &ServiceAccountKey) -> String {
    format!("{} {}", key.client_email, key.token_uri)
}

/// A token for `key`, from `cache` while it has more than a minute left, else from its token endpoint.
pub async fn token(cache: &TokenCache, http: &Http, key: &ServiceAccountKey) -> Result<String> {
    let id = cache_key(key);
    if let Some(token) = cache.get(&id) {
        return Ok(token);
    }
    let assertion = assertion(key)?;
    let form = [("grant_type", "urn:ietf:params:oauth:grant-type:jwt-bearer"), ("assertion", &assertion)];
    let answer = http.send("gcp:token", |c| c.post(&key.token_uri).form(&form)).await?;
    if !answer.is_success() {
        return Err(Error::service(
            "gcp:token",
            format!(
                "{} refused the service account {}: {} {}",
                key.token_uri,
                key.client_email,
                answer.status,
                answer.text()
            ),
            false,
        ));
    }
    let t: TokenAnswer = answer.json("gcp:token")?;
    cache.put(&id, &t.access_token, Duration::from_secs(t.expires_in));
    Ok(t.access_token)
}

/// The signed JWT asking `key.token_uri` for a token of [`SCOPE`], valid an hour from now.
pub fn assertion(key: &ServiceAccountKey) -> Result<String> {
    let iat = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let claims = Claims { iss: &key.client_email, scope: SCOPE, aud: &key.token_uri, iat, exp: iat + 3600 };
    let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::RS256);
    header.kid = key.private_key_id.clone();
    let signing = jsonwebtoken::EncodingKey::from_rsa_pem(key.private_key.as_bytes()).map_err(|e| {
        Error::service(
            "gcp:credentials",
            format!("the private key of service account {} does not load: {e}", key.client_email),
            false,
        )
    })?;
    jsonwebtoken::encode(&header, &claims, &signing)
        .map_err(|e| Error::service("gcp:credentials", format!("signing the token request: {e}"), false))
}
