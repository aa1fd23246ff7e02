//! The install-config of one cluster: the template the pool names by reference (checked against its pin) or its
//! settings' own, rendered for the cluster ([`crate::template`]), checked against openshift-install's schema
//! ([`crate::schema`]), with the fields the installer owns put in (the pull secret and SSH key from the secrets the
//! settings name, the cluster's name, the tags the stack's power role needs), and the pool's extra manifests
//! rendered and checked beside it ([`crate::manifests`]).

use apiary_clouds::webhook::InstallRequest;
use apiary_ports::{Error, Result};
use serde_json::{json, Value};

use crate::manifests::Manifest;
use crate::model::{PoolSettings, MAX_TEMPLATE_BYTES};
use crate::schema::{Problem, Schema};
use crate::service::Installer;
use crate::template::{render, Values};

/// How many problems a refused install-config's answer names.
pub(crate) const PROBLEMS: usize = 8;

/// The stand-in for the pull secret while a template is checked: the real one is put in only once it passed.
pub(crate) const PULL_SECRET_PLACEHOLDER: &str = "{\"auths\":{}}";

/// One cluster's install-config, and what goes beside it in its install directory.
pub(crate) struct Rendered {
    /// The install-config, as openshift-install reads it (JSON is YAML).
    pub(crate) text: String,
    /// The cluster's domain, `<name>.<baseDomain>`.
    pub(crate) domain: String,
    /// The pull secret, for the job to read the release image with (it is also in the install-config, which
    /// openshift-install consumes).
    pub(crate) pull: String,
    /// The pool's extra manifests, rendered and checked.
    pub(crate) manifests: Vec<Manifest>,
    /// The platform it names.
    pub(crate) platform: String,
}

/// `name` checked as a template's name (the part of `installConfigTemplate` before any `@`): it becomes an object's
/// key and a file's path (`templates/<name>.yaml`), so nothing else may pass.
pub fn template_name(name: &str) -> std::result::Result<(), String> {
    if name.contains('@') {
        return Err(format!("installConfigTemplate: {name:?} is a reference, not a name"));
    }
    apiary_planner::validate::check_template_ref(name).map_err(|why| format!("installConfigTemplate: {why}"))
}

/// The SHA-256 of `bytes`, as lowercase hex.
pub(crate) fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

/// The fields the installer owns: the pull secret and SSH key come from the pool's settings, `metadata.name` is
/// the cluster's name, `baseDomain` the pool's unless the template says.
pub(crate) fn own_fields(doc: &mut Value, req: &InstallRequest) -> std::result::Result<(), Problem> {
    let problem = |field: &str, why: String| Problem { field: field.to_owned(), why };
    let map = crate::schema::object(doc)?.clone();
    for field in ["pullSecret", "sshKey"] {
        if map.contains_key(field) {
            return Err(problem(field, "must not be in the template: the pool's settings name its secret".into()));
        }
    }
    match map.get("metadata").and_then(|m| m.get("name")) {
        None => doc["metadata"]["name"] = json!(req.cluster_name),
        Some(name) if name == &json!(req.cluster_name) => {}
        Some(name) => {
            return Err(problem(
                "metadata.name",
                format!("is {name}, not the cluster's name {:?}: write {{clusterName}}", req.cluster_name),
            ))
        }
    }
    if !map.contains_key("baseDomain") {
        match &req.base_domain {
            Some(domain) => doc["baseDomain"] = json!(domain),
            None => return Err(problem("baseDomain", "is required: the pool has none, so the template must".into())),
        }
    }
    if !map.contains_key("apiVersion") {
        doc["apiVersion"] = json!("v1");
    }
    // On AWS every resource the install makes carries the pool and the cluster, so the stack's power role (which
    // may start and stop only instances tagged apiary:pool) powers the cluster's machines.
    if doc["platform"]["aws"].is_object() {
        let tags = &mut doc["platform"]["aws"]["userTags"];
        if !tags.is_object() {
            *tags = json!({});
        }
        tags["apiary:pool"] = json!(req.pool);
        tags["apiary:cluster"] = json!(req.cluster_id);
    }
    Ok(())
}

impl Installer {
    /// The install-config of cluster `req` from `settings`: `Ok(Err(why))` when the template does not render or
    /// the result does not fit openshift-install's schema, naming the field.
    pub(crate) async fn install_config(
        &self,
        req: &InstallRequest,
        settings: &PoolSettings,
    ) -> Result<std::result::Result<Rendered, String>> {
        let values = Values {
            cluster_name: &req.cluster_name,
            base_domain: req.base_domain.as_deref(),
            labels: &req.labels,
            parameters: &req.parameters,
        };
        let template = match self.template(req, settings).await? {
            Ok(template) => template,
            Err(why) => return Ok(Err(why)),
        };
        let text = match render(&template, &values) {
            Ok(text) => text,
            Err(refused) => return Ok(Err(format!("install-config template: {refused}"))),
        };
        let mut doc: Value = match serde_saphyr::from_str(&text) {
            Ok(doc) => doc,
            Err(e) => return Ok(Err(format!("install-config template: not YAML once rendered: {e}"))),
        };
        if let Err(problem) = own_fields(&mut doc, req) {
            return Ok(Err(format!("install-config: {problem}")));
        }
        doc["pullSecret"] = json!(PULL_SECRET_PLACEHOLDER);
        let schema = Schema::installer().map_err(Error::Config)?;
        let problems = schema.check(&doc, PROBLEMS);
        if !problems.is_empty() {
            let said: Vec<String> = problems.iter().map(Problem::to_string).collect();
            return Ok(Err(format!("install-config: {}", said.join("; "))));
        }
        let manifests = match crate::manifests::rendered(&settings.manifests, &values) {
            Ok(manifests) => manifests,
            Err(why) => return Ok(Err(format!("pools/{}.json: {why}", req.pool))),
        };
        let platform = crate::credentials::platform(&doc).unwrap_or_default();
        if let Err(why) = self.cloud_credentials(req, settings, &platform).await {
            return Ok(Err(format!("credentials: {why}")));
        }
        let domain = format!("{}.{}", req.cluster_name, doc["baseDomain"].as_str().unwrap_or_default());
        // Only now the secrets: a refused template costs no read of them.
        let pull = match self.secrets.get(&settings.pull_secret, &req.pool).await {
            Ok(secret) => secret,
            Err(e) => return Ok(Err(format!("pullSecret: {e}"))),
        };
        let parsed: Option<Value> = serde_json::from_str(pull.expose()).ok();
        if !parsed.as_ref().is_some_and(|p| p["auths"].is_object()) {
            return Ok(Err(format!(
                "pullSecret: the secret {} is not a pull secret (JSON with \"auths\")",
                settings.pull_secret
            )));
        }
        doc["pullSecret"] = json!(pull.expose().trim());
        if let Some(arn) = &settings.ssh_key {
            match self.secrets.get(arn, &req.pool).await {
                Ok(key) => doc["sshKey"] = json!(key.expose().trim()),
                Err(e) => return Ok(Err(format!("sshKey: {e}"))),
            }
        }
        // JSON is YAML: openshift-install reads it as it is.
        Ok(Ok(Rendered { text: doc.to_string(), domain, pull: pull.expose().trim().to_owned(), manifests, platform }))
    }

    /// The install-config template of `req`: the one the pool names, if its content is the pinned one; else the
    /// pool's settings' own. `Ok(Err(why))` names what is missing or wrong.
    pub(crate) async fn template(
        &self,
        req: &InstallRequest,
        settings: &PoolSettings,
    ) -> Result<std::result::Result<String, String>> {
        let Some(reference) = &req.install_config_template else {
            if settings.install_config.trim().is_empty() {
                return Ok(Err(format!(
                    "installConfig: pools/{}.json has no template, and the pool names none (installConfigTemplate)",
                    req.pool
                )));
            }
            return Ok(Ok(settings.install_config.clone()));
        };
        if let Err(why) = apiary_planner::validate::check_template_ref(reference) {
            return Ok(Err(format!("installConfigTemplate: {why}")));
        }
        let (name, pin) = reference.split_once("@sha256:").map_or((reference.as_str(), None), |(n, p)| (n, Some(p)));
        let Some(text) = self.pools.template(name).await? else {
            return Ok(Err(format!(
                "installConfigTemplate: the installer keeps no template {name:?} (templates/{name}.yaml)"
            )));
        };
        if text.len() > MAX_TEMPLATE_BYTES {
            return Ok(Err(format!(
                "installConfigTemplate: templates/{name}.yaml is over {MAX_TEMPLATE_BYTES} bytes ({})",
                text.len()
            )));
        }
        if let Some(pin) = pin {
            let digest = sha256_hex(text.as_bytes());
            if digest != pin {
                return Ok(Err(format!(
                    "installConfigTemplate: templates/{name}.yaml is sha256:{digest}, not the pool's pinned \
                     sha256:{pin}: keep a changed template under a new name, or pin the pool to its new digest"
                )));
            }
        }
        Ok(Ok(text))
    }

    /// On a cloud whose jobs need credentials, the pool's: named in its settings, tagged for it, of the cloud's
    /// shape. `Err` says what is wrong, never a value.
    async fn cloud_credentials(
        &self,
        req: &InstallRequest,
        settings: &PoolSettings,
        platform: &str,
    ) -> std::result::Result<(), String> {
        if !crate::credentials::needed(platform) {
            return Ok(());
        }
        let Some(arn) = &settings.credentials else {
            return Err(format!(
                "a {platform} install needs the cloud's credentials: name their secret in pools/{}.json (credentials)",
                req.pool
            ));
        };
        let secret = self.secrets.get(arn, &req.pool).await.map_err(|e| e.to_string())?;
        crate::credentials::check(platform, arn, secret.expose())
    }
}
