//! The cloud credentials openshift-install installs and destroys a cluster with on Azure and GCP, where a job
//! cannot take them from its role as it does on AWS.
//!
//! A pool's settings name them by ARN (`credentials`): a secret tagged for the pool, as every secret Apiary reads,
//! holding what openshift-install reads on that cloud. On GCP a service account's JSON key
//! (`GOOGLE_APPLICATION_CREDENTIALS`); on Azure a service principal as `~/.azure/osServicePrincipal.json` holds it,
//! `{"subscriptionId", "tenantId", "clientId", "clientSecret"}` (`AZURE_AUTH_LOCATION`). An install request is
//! refused before any job when its cloud needs them and they are missing, not tagged for the pool, or not of that
//! shape, naming `credentials` and never quoting the secret.
//!
//! Before each job the installer writes them into the cluster's install directory ([`file`]); the job moves them
//! out of it before anything else runs, to a file of its own whose path it gives openshift-install, so they are
//! never kept with the directory.

use serde_json::Value;

/// The clouds whose jobs need credentials, and the variable openshift-install reads their file's path from.
pub const CLOUDS: [(&str, &str); 2] = [("azure", "AZURE_AUTH_LOCATION"), ("gcp", "GOOGLE_APPLICATION_CREDENTIALS")];

/// Whether a cluster on `platform` (install-config's `platform` key) needs credentials for its jobs.
pub fn needed(platform: &str) -> bool {
    CLOUDS.iter().any(|(cloud, _)| *cloud == platform)
}

/// Where, in the install directory, the job takes `cloud`'s credentials from.
pub fn file(cloud: &str) -> String {
    format!(".apiary/{cloud}-credentials.json")
}

/// The platform an install-config names: the one key of its `platform` (`aws`, `azure`, `gcp`, `none`, …).
pub fn platform(install_config: &Value) -> Option<String> {
    let platforms = install_config["platform"].as_object()?;
    (platforms.len() == 1).then(|| platforms.keys().next().cloned()).flatten()
}

/// Whether `text` (the secret `arn`'s) is what openshift-install reads on `cloud`: `Err` names what is missing,
/// never a value.
pub fn check(cloud: &str, arn: &str, text: &str) -> Result<(), String> {
    match cloud {
        "gcp" => match apiary_clouds::gcp::auth::ServiceAccountKey::parse(arn, text) {
            Ok(_) => Ok(()),
            Err(apiary_ports::Error::Service { message, .. }) => Err(message),
            Err(e) => Err(e.to_string()),
        },
        "azure" => {
            let doc: Value = serde_json::from_str(text).map_err(|_| {
                format!("secret {arn} is not JSON: an Azure service principal is osServicePrincipal.json")
            })?;
            let missing: Vec<&str> = ["subscriptionId", "tenantId", "clientId", "clientSecret"]
                .into_iter()
                .filter(|f| doc[*f].as_str().is_none_or(|v| v.trim().is_empty()))
                .collect();
            match missing.as_slice() {
                [] => Ok(()),
                _ => Err(format!(
                    "secret {arn} is not an Azure service principal as openshift-install reads one: {} missing",
                    missing.join(", ")
                )),
            }
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const ARN: &str = "arn:aws:secretsmanager:us-east-1:123456789012:secret:ocp-cloud-AbCdEf";

    #[test]
    fn the_platform_is_the_install_configs_one_key_and_only_azure_and_gcp_need_credentials() {
        assert_eq!(platform(&json!({"platform": {"gcp": {"projectID": "p"}}})).as_deref(), Some("gcp"));
        assert_eq!(platform(&json!({"platform": {}})), None);
        assert_eq!(platform(&json!({"platform": {"aws": {}, "gcp": {}}})), None);
        assert!(needed("azure") && needed("gcp") && !needed("aws") && !needed("none"));
        assert_eq!(file("gcp"), ".apiary/gcp-credentials.json");
    }

    #[test]
    fn credentials_not_of_the_clouds_shape_are_refused_naming_what_is_missing_never_a_value() {
        let principal = json!({"subscriptionId": "s", "tenantId": "t", "clientId": "c", "clientSecret": "hush-1"});
        assert_eq!(check("azure", ARN, &principal.to_string()), Ok(()));
        let mut partial = principal.clone();
        partial["tenantId"] = json!("");
        partial.as_object_mut().map(|o| o.remove("subscriptionId"));
        let why = check("azure", ARN, &partial.to_string()).expect_err("partial");
        assert!(why.ends_with("subscriptionId, tenantId missing") && !why.contains("hush-1"), "{why}");
        assert!(check("azure", ARN, "hush-2").expect_err("not JSON").contains("is not JSON"));
        let why = check("gcp", ARN, r#"{"client_email": "a@p.iam.gserviceaccount.com", "private_key": "hush-3"}"#)
            .expect_err("no token_uri");
        assert!(why.contains("token_uri") && !why.contains("hush-3"), "{why}");
        assert_eq!(check("aws", ARN, "anything"), Ok(()));
    }
}
