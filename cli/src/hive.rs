//! `pool import`: a Hive `ClusterPool` manifest as an Apiary pool, with what could not be carried over and why.
//!
//! The sizing and lifecycle fields map one to one (seed 000, 002 and 003 name them as Hive does). What Hive keeps
//! in Kubernetes secrets, and what its installer needs (the release image, the install-config template, the pull
//! secret), has no place in a pool spec: Apiary never holds secrets, and installs through your installer
//! (`provisioner.webhook`) or from a machine image. A base spec (`--into`) supplies what the manifest cannot say.
//!
//! With the reference installer (`--installer URL --installer-secret ARN`), what Hive's installer needed goes to
//! the installer's settings for the pool instead: the release image of the ClusterImageSet `imageSetRef` names,
//! and the install-config of the Secret `installConfigSecretTemplateRef` names as a template (its name and base
//! domain become `{clusterName}` and `{baseDomain}`), both read from the same file when it holds them (`kubectl get
//! clusterpool/ci clusterimageset/… secret/… -o yaml` is a `List`). The pull secret's value is never read: the
//! settings name a Secrets Manager secret holding it, to be made.

use serde_json::{json, Map, Value};

use crate::error::{Failure, Result};

/// A translated manifest.
#[derive(Debug, Clone, PartialEq)]
pub struct Import {
    /// The pool's name (the manifest's `metadata.name`).
    pub name: String,
    /// The pool spec: the manifest's fields laid over the base.
    pub spec: Value,
    /// `(manifest field, why it was not carried over)`.
    pub dropped: Vec<(String, String)>,
    /// `(spec field, what is wrong)`: what the spec still needs before the API will take it.
    pub needed: Vec<(String, String)>,
    /// `(spec field, what it does)`: Apiary's options a ClusterPool has no field for, left unset ([`NOTES`]).
    pub notes: Vec<(String, String)>,
    /// With the reference installer: its settings for the pool (`pools/<name>.json` in its bucket).
    pub installer_settings: Option<Value>,
    /// `(settings field, what is wrong)`: what those settings still need.
    pub settings_needed: Vec<(String, String)>,
}

/// The reference installer a pool is imported for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Installer {
    /// Its URL (the installer stack's InstallerUrl output).
    pub url: String,
    /// The ARN of its signing key's secret.
    pub secret: String,
    /// The ARN of the secret holding the pool's pull secret, if made already.
    pub pull_secret: Option<String>,
    /// The ARN of the secret holding the machines' SSH key, if any.
    pub ssh_key: Option<String>,
}

/// Apiary's sizing options that a ClusterPool has no field for: the import leaves them unset, so the pool
/// behaves as Hive's did, and names them for the team to weigh.
pub const NOTES: &[(&str, &str)] = &[
    (
        "adaptiveRunningCount",
        "sets the running count from the claims the pool sees (instantShare or waitP95), and with forecast from \
         the week's pattern, instead of a fixed runningCount",
    ),
    (
        "adaptiveRunningCount.keepFresh",
        "keeps a just-installed cluster Running while claims are expected sooner than a stop and a resume take, \
         and lets a cluster that is up stand in for a claimed spare; Hive (seed 000) hibernates the newest \
         clusters beyond runningCount at once. Fewer stops and resumes, a different choice of which clusters run",
    ),
    ("resumeCanaries", "resumes standbys that have slept long, in hours you choose, to find the broken ones first"),
];

/// Spec fields with the same name and meaning in both.
const SAME: &[&str] = &[
    "size",
    "runningCount",
    "maxSize",
    "maxConcurrent",
    "hibernateAfter",
    "installAttemptsLimit",
    "baseDomain",
    "powerstateTransitionToRunningTimeout",
    "powerstateTransitionToHibernatingTimeout",
];

const NO_SECRETS: &str = "a Kubernetes secret: Apiary holds no secrets, it reads them from Secrets Manager by ARN";
const INSTALLER: &str = "Apiary does not run openshift-install: your installer (provisioner.webhook) or the \
machine image decides this";

/// Why a ClusterPool spec field that does not map is left behind.
fn why_not(field: &str) -> &'static str {
    match field {
        "imageSetRef" | "installConfigSecretTemplateRef" | "installerEnv" => INSTALLER,
        "pullSecretRef" => "the pull secret is your installer's: Apiary holds no secrets",
        "skipMachinePools" => "Apiary does not manage MachinePools",
        "annotations" => "Apiary pools have labels only",
        _ => "not a ClusterPool field this import knows",
    }
}

/// Translates `manifest` (a parsed ClusterPool) laid over `base` (a pool spec, possibly partial). `name`
/// overrides the manifest's.
pub fn translate(manifest: &Value, base: Option<&Value>, name: Option<&str>) -> Result<Import> {
    translate_for(manifest, base, name, None)
}

/// [`translate`], for the reference installer when `installer` is given. `manifest` may be a `List` holding the
/// ClusterPool and the ClusterImageSet and Secret it names.
pub fn translate_for(
    manifest: &Value,
    base: Option<&Value>,
    name: Option<&str>,
    installer: Option<&Installer>,
) -> Result<Import> {
    let (manifest, related) = the_pool(manifest)?;
    let manifest = &manifest;
    let kind = manifest["kind"].as_str().unwrap_or_default();
    if kind != "ClusterPool" {
        let kind = if kind.is_empty() { "missing".to_owned() } else { format!("{kind:?}") };
        return Err(Failure::usage(format!("not a Hive ClusterPool manifest (kind is {kind})")));
    }
    let mut dropped = vec![];
    let mut leave = |field: String, why: &str| dropped.push((field, why.to_owned()));
    // With the reference installer, what its settings carry is not left behind.
    let carried: &[&str] =
        if installer.is_some() { &["imageSetRef", "installConfigSecretTemplateRef", "pullSecretRef"] } else { &[] };
    let api_version = manifest["apiVersion"].as_str().unwrap_or_default();
    if !api_version.starts_with("hive.openshift.io/") {
        leave("apiVersion".into(), "not hive.openshift.io: translated as Hive's v1 all the same");
    }
    let name = match name.or(manifest["metadata"]["name"].as_str()) {
        Some(n) => n.to_owned(),
        None => return Err(Failure::usage("the manifest has no metadata.name: pass --name")),
    };
    if let Some(ns) = manifest["metadata"]["namespace"].as_str() {
        leave(
            format!("metadata.namespace ({ns})"),
            "Apiary pools have no namespace: the name alone names the pool. Who could claim from it there (RBAC on \
             ClusterClaims in the namespace) and who could change it are the pool's access.claimants and \
             access.admins here: list those principals, or the stack's DefaultPoolAccess applies",
        );
    }
    let empty = Map::new();
    let hive = manifest["spec"].as_object().unwrap_or(&empty);
    let mut spec = Map::new();
    let mut labels = manifest["metadata"]["labels"].as_object().cloned().unwrap_or_default();
    for (field, value) in hive {
        if value.is_null() {
            continue;
        }
        match field.as_str() {
            f if SAME.contains(&f) => {
                spec.insert(f.to_owned(), value.clone());
            }
            "claimLifetime" => claim_lifetime(value, &mut spec, &mut leave),
            "hibernationConfig" => hibernation_config(value, hive, &mut spec, &mut leave),
            "inventory" => inventory(value, &mut spec, &mut leave),
            "labels" => {
                for (k, v) in value.as_object().unwrap_or(&empty) {
                    labels.insert(k.clone(), v.clone());
                }
            }
            "platform" => platform(value, &mut spec, &mut leave),
            other if carried.contains(&other) => {}
            other => {
                let shown = match value {
                    Value::Object(o) if o.get("name").is_some_and(Value::is_string) => {
                        format!("spec.{other} ({})", o["name"].as_str().unwrap_or_default())
                    }
                    _ => format!("spec.{other}"),
                };
                leave(shown, why_not(other));
            }
        }
    }
    if !labels.is_empty() {
        spec.insert("labels".into(), Value::Object(labels));
    }
    if let Some(annotations) = manifest["metadata"]["annotations"].as_object().filter(|a| !a.is_empty()) {
        leave(format!("metadata.annotations ({} of them)", annotations.len()), why_not("annotations"));
    }
    let mut merged = base.cloned().unwrap_or_else(|| json!({}));
    if let (Some(from), Some(to)) = (platform_kind(base), platform_kind(Some(&Value::Object(spec.clone())))) {
        if from != to {
            return Err(Failure::usage(format!("the base spec's platform is {from} but the ClusterPool's is {to}")));
        }
    }
    merge(&mut merged, Value::Object(spec));
    let mut settings_needed = Vec::new();
    let installer_settings = installer.map(|installer| {
        let (settings, needed) = reference_installer(manifest, &related, &mut merged, installer);
        settings_needed = needed;
        settings
    });
    let needed = check(&merged);
    let notes = NOTES
        .iter()
        .filter(|(field, _)| !set(&merged, field))
        .map(|(field, what)| ((*field).to_owned(), (*what).to_owned()))
        .collect();
    Ok(Import { name, spec: merged, dropped, needed, notes, installer_settings, settings_needed })
}

/// The ClusterPool, and the resources beside it when `manifest` is a `List` (one ClusterPool in it, at most).
fn the_pool(manifest: &Value) -> Result<(Value, Vec<Value>)> {
    Ok(match manifest["kind"].as_str() {
        Some("List") => {
            let items = manifest["items"].as_array().cloned().unwrap_or_default();
            let (pools, related): (Vec<Value>, Vec<Value>) =
                items.into_iter().partition(|i| i["kind"] == "ClusterPool");
            match pools.as_slice() {
                [pool] => (pool.clone(), related),
                [] => return Err(Failure::usage("the List holds no ClusterPool")),
                many => {
                    return Err(Failure::usage(format!(
                        "the List holds {} ClusterPools: import one at a time",
                        many.len()
                    )))
                }
            }
        }
        _ => (manifest.clone(), Vec::new()),
    })
}

/// `spec.claimLifetime`: its default and maximum carried over, anything else left.
fn claim_lifetime(value: &Value, spec: &mut Map<String, Value>, leave: &mut impl FnMut(String, &str)) {
    let mut lifetime = Map::new();
    for (k, v) in value.as_object().into_iter().flatten() {
        match k.as_str() {
            "default" | "maximum" => {
                lifetime.insert(k.clone(), v.clone());
            }
            _ => leave(format!("spec.claimLifetime.{k}"), why_not(k)),
        }
    }
    spec.insert("claimLifetime".into(), Value::Object(lifetime));
}

/// `spec.hibernationConfig`: its resume timeout carried over as `powerstateTransitionToRunningTimeout` unless the
/// pool sets that itself.
fn hibernation_config(
    value: &Value,
    hive: &Map<String, Value>,
    spec: &mut Map<String, Value>,
    leave: &mut impl FnMut(String, &str),
) {
    for (k, v) in value.as_object().into_iter().flatten() {
        match (k.as_str(), hive.get("powerstateTransitionToRunningTimeout")) {
            ("resumeTimeout", None) => {
                spec.insert("powerstateTransitionToRunningTimeout".into(), v.clone());
            }
            ("resumeTimeout", Some(_)) => leave(
                "spec.hibernationConfig.resumeTimeout".into(),
                "spec.powerstateTransitionToRunningTimeout is set too, and is the one carried over",
            ),
            _ => leave(format!("spec.hibernationConfig.{k}"), why_not(k)),
        }
    }
}

/// The resource of `kind` named `name` among `related`.
fn named<'a>(related: &'a [Value], kind: &str, name: &str) -> Option<&'a Value> {
    related.iter().find(|r| r["kind"] == kind && r["metadata"]["name"] == name)
}

/// The pool `spec` made to install through the reference installer, and the installer's settings for it from
/// what the ClusterPool names, with what is still needed of them.
fn reference_installer(
    manifest: &Value,
    related: &[Value],
    spec: &mut Value,
    installer: &Installer,
) -> (Value, Vec<(String, String)>) {
    let hive = &manifest["spec"];
    let mut needed = Vec::new();
    let mut need = |field: &str, why: String| needed.push((format!("installerSettings.{field}"), why));
    spec["provisioner"] = json!({"webhook": {"url": installer.url, "secret": installer.secret}});
    if spec["readiness"].is_null() {
        // Each install writes its cluster's kubeconfig to a secret tagged for the pool, named in the outputs.
        spec["readiness"] = json!({"kubernetes": {"credentials": "{outputs.kubeconfigSecretArn}"}});
    }
    let image_set = hive["imageSetRef"]["name"].as_str().unwrap_or_default();
    let release = named(related, "ClusterImageSet", image_set).and_then(|s| s["spec"]["releaseImage"].as_str());
    // The release is the pool's, so that a bump of it replaces the pool's unclaimed clusters.
    if let Some(release) = release {
        spec["release"] = json!(release);
    }
    if release.is_none() {
        need(
            "releaseImage",
            format!("the release image: ClusterImageSet {image_set:?}'s spec.releaseImage (not in the file)"),
        );
    }
    let template_ref = hive["installConfigSecretTemplateRef"]["name"].as_str().unwrap_or_default();
    let template = named(related, "Secret", template_ref).and_then(|secret| {
        let encoded = secret["data"]["install-config.yaml"].as_str();
        let decoded = encoded.and_then(|e| {
            use base64::Engine;
            let bytes = base64::engine::general_purpose::STANDARD.decode(e.trim()).ok()?;
            String::from_utf8(bytes).ok()
        });
        decoded.or_else(|| secret["stringData"]["install-config.yaml"].as_str().map(str::to_owned))
    });
    let mut install_config = String::new();
    match template.map(|t| serde_saphyr::from_str::<Value>(&t)) {
        None => need(
            "installConfig",
            format!("the install-config template: Secret {template_ref:?}'s install-config.yaml (not in the file)"),
        ),
        Some(Err(e)) => {
            need("installConfig", format!("Secret {template_ref:?}'s install-config.yaml is not YAML: {e}"))
        }
        Some(Ok(mut config)) => {
            if let Some(map) = config.as_object_mut() {
                // The installer puts these in from the secrets the settings name.
                map.remove("pullSecret");
                if map.remove("sshKey").is_some() && installer.ssh_key.is_none() {
                    need(
                        "sshKey",
                        "the template's sshKey: store it in a secret tagged for the pool, name its ARN (--ssh-key)"
                            .into(),
                    );
                }
            }
            config["metadata"]["name"] = json!("{clusterName}");
            if !spec["baseDomain"].is_null() {
                config["baseDomain"] = json!("{baseDomain}");
            }
            if spec["platform"]["aws"].is_object() && spec["platform"]["aws"]["machineCount"].is_null() {
                let masters = config["controlPlane"]["replicas"].as_u64().unwrap_or(3);
                let workers: u64 = config["compute"]
                    .as_array()
                    .map_or(3, |pools| pools.iter().map(|p| p["replicas"].as_u64().unwrap_or(3)).sum());
                spec["platform"]["aws"]["machineCount"] = json!(masters + workers);
            }
            install_config = serde_saphyr::to_string(&config).unwrap_or_default();
        }
    }
    if installer.pull_secret.is_none() {
        let pull = hive["pullSecretRef"]["name"].as_str().unwrap_or("the pull secret");
        need(
            "pullSecret",
            format!(
                "the ARN of a Secrets Manager secret holding Secret {pull:?}'s .dockerconfigjson, tagged apiary=true \
                 and apiary:pools with this pool (--pull-secret)"
            ),
        );
    }
    let mut settings = json!({
        "releaseImage": release.unwrap_or_default(),
        "installConfig": install_config,
        "pullSecret": installer.pull_secret.clone().unwrap_or_default(),
    });
    if let Some(key) = &installer.ssh_key {
        settings["sshKey"] = json!(key);
    }
    (settings, needed)
}

/// Whether `spec` sets the dotted `field`.
fn set(spec: &Value, field: &str) -> bool {
    field.split('.').try_fold(spec, |v, k| v.get(k)).is_some_and(|v| !v.is_null())
}

fn platform_kind(spec: Option<&Value>) -> Option<String> {
    spec?.get("platform")?.as_object()?.keys().next().cloned()
}

/// Seed 003's inventory (`{clusterDeployments: [{name}]}`) carries over; Hive's list of
/// ClusterDeploymentCustomization references does not (each patches an install-config, it names no cluster).
fn inventory(value: &Value, spec: &mut Map<String, Value>, leave: &mut impl FnMut(String, &str)) {
    match value {
        Value::Object(o) if o.contains_key("clusterDeployments") => {
            spec.insert("inventory".into(), json!({ "clusterDeployments": o["clusterDeployments"] }));
        }
        Value::Array(entries) => leave(
            format!("spec.inventory ({} ClusterDeploymentCustomization entries)", entries.len()),
            "each patches an install-config for your installer; Apiary's inventory is a list of cluster names \
             (inventory.clusterDeployments[].name)",
        ),
        _ => leave("spec.inventory".into(), "neither seed 003's clusterDeployments nor Hive's list"),
    }
}

/// The parts of Hive's platform that say where machines are.
fn platform(value: &Value, spec: &mut Map<String, Value>, leave: &mut impl FnMut(String, &str)) {
    let Some((kind, p)) = value.as_object().and_then(|o| o.iter().next()) else { return };
    let empty = Map::new();
    let p = p.as_object().unwrap_or(&empty);
    // (Hive's field, Apiary's field) for each that maps, per platform.
    let (known, out_kind): (&[(&str, &str)], &str) = match kind.as_str() {
        "aws" => (&[("region", "region"), ("userTags", "tags")], "aws"),
        "gcp" => (&[], "gcp"),
        "azure" => (&[("region", "location")], "azure"),
        "vsphere" => (
            &[
                ("vCenter", "server"),
                ("datacenter", "datacenter"),
                ("defaultDatastore", "datastore"),
                ("folder", "folder"),
            ],
            "vsphere",
        ),
        other => {
            leave(format!("spec.platform.{other}"), "Apiary powers aws, gcp, azure and vsphere machines");
            return;
        }
    };
    let mut out = Map::new();
    for (field, v) in p {
        match known.iter().find(|(from, _)| from == field) {
            Some((_, to)) => {
                out.insert((*to).to_owned(), v.clone());
            }
            None => {
                let why = match (out_kind, field.as_str()) {
                    ("aws", "credentialsSecretRef") => {
                        "Apiary powers EC2 with its power function's IAM role, in its own account; for the \
                         account these credentials are for, deploy infra/member-account.yaml there (a role \
                         trusting Apiary's power role with this pool's ExternalId) and set platform.aws.roleArn"
                    }
                    ("vsphere", "certificatesSecretRef") => {
                        "a Kubernetes secret: put the vCenter's CA certificates in platform.vsphere.caBundle"
                    }
                    (_, "credentialsSecretRef") => NO_SECRETS,
                    ("gcp", "region") => "Apiary creates instances in zones: set platform.gcp.zone or zones",
                    ("vsphere", "cluster" | "network") => {
                        "Apiary clones platform.vsphere.template, whose settings place the machines"
                    }
                    ("azure", "baseDomainResourceGroupName") => "DNS is your installer's",
                    ("azure", "cloudName") => "Apiary talks to Azure's public cloud",
                    _ => INSTALLER,
                };
                leave(format!("spec.platform.{kind}.{field}"), why);
            }
        }
    }
    spec.insert("platform".into(), json!({ out_kind: out }));
}

/// `patch` laid over `base`: mappings merged key by key, anything else replaced.
fn merge(base: &mut Value, patch: Value) {
    match (base, patch) {
        (Value::Object(b), Value::Object(p)) => {
            for (k, v) in p {
                merge(b.entry(k).or_insert(Value::Null), v);
            }
        }
        (b, p) => *b = p,
    }
}

/// What the API would refuse in `spec`: the same validation, run here.
fn check(spec: &Value) -> Vec<(String, String)> {
    match apiary_planner::validate::strictly::<apiary_planner::PoolSpec>(spec) {
        Err(errors) => errors.into_iter().map(|e| (e.field, e.message)).collect(),
        Ok(spec) => apiary_planner::validate_spec(&spec)
            .err()
            .unwrap_or_default()
            .into_iter()
            .map(|e| (e.field, e.message))
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn yaml(text: &str) -> Value {
        serde_saphyr::from_str(text).expect("yaml")
    }

    #[test]
    fn sizing_and_lifecycle_fields_map_one_to_one() {
        let m = yaml(
            "apiVersion: hive.openshift.io/v1\nkind: ClusterPool\nmetadata: {name: ci}\nspec:\n  size: 4\n  \
             runningCount: 2\n  maxSize: 8\n  maxConcurrent: 2\n  hibernateAfter: 1h\n  installAttemptsLimit: 2\n  \
             claimLifetime: {default: 2h, maximum: 8h}\n  hibernationConfig: {resumeTimeout: 20m}\n  \
             powerstateTransitionToHibernatingTimeout: 10m\n  baseDomain: ci.example.com\n  \
             inventory: {clusterDeployments: [{name: foo}, {name: bar}]}\n  platform: {fake: {}}\n",
        );
        let i = translate(&m, Some(&json!({"platform": {"fake": {}}})), None);
        // fake is no Hive platform: it is reported, and the base's stays.
        let i = i.expect("translated");
        assert_eq!(i.name, "ci");
        assert_eq!(
            i.spec,
            json!({"size": 4, "runningCount": 2, "maxSize": 8, "maxConcurrent": 2, "hibernateAfter": "1h",
                "installAttemptsLimit": 2, "claimLifetime": {"default": "2h", "maximum": "8h"},
                "powerstateTransitionToRunningTimeout": "20m", "powerstateTransitionToHibernatingTimeout": "10m",
                "baseDomain": "ci.example.com", "inventory": {"clusterDeployments": [{"name": "foo"}, {"name": "bar"}]},
                "platform": {"fake": {}}})
        );
        assert_eq!(i.needed, vec![]);
        assert_eq!(i.dropped.len(), 1, "{:?}", i.dropped);
    }

    #[test]
    fn what_does_not_map_is_named_with_the_reason_and_what_is_missing_is_listed() {
        let m = yaml(
            "apiVersion: hive.openshift.io/v1\nkind: ClusterPool\nmetadata:\n  name: ci\n  namespace: hive\nspec:\n  \
             size: 2\n  imageSetRef: {name: openshift-v4.16.3}\n  pullSecretRef: {name: pull-secret}\n  \
             inventory: [{kind: ClusterDeploymentCustomization, name: cdc-1}]\n  \
             platform:\n    aws:\n      region: us-east-1\n      credentialsSecretRef: {name: aws-creds}\n",
        );
        let i = translate(&m, None, None).expect("translated");
        assert_eq!(i.spec, json!({"size": 2, "platform": {"aws": {"region": "us-east-1"}}}));
        let dropped: Vec<&str> = i.dropped.iter().map(|(f, _)| f.as_str()).collect();
        assert_eq!(
            dropped,
            [
                "metadata.namespace (hive)",
                "spec.imageSetRef (openshift-v4.16.3)",
                "spec.inventory (1 ClusterDeploymentCustomization entries)",
                "spec.platform.aws.credentialsSecretRef",
                "spec.pullSecretRef (pull-secret)",
            ]
        );
        assert!(i.needed.iter().any(|(f, _)| f.starts_with("platform.aws")), "{:?}", i.needed);
        let (_, why) = i.dropped.iter().find(|(f, _)| f.ends_with("credentialsSecretRef")).expect("the credentials");
        assert!(why.contains("member-account.yaml") && why.contains("platform.aws.roleArn"), "{why}");
        let (_, why) = i.dropped.iter().find(|(f, _)| f.starts_with("metadata.namespace")).expect("the namespace");
        assert!(why.contains("access.claimants") && why.contains("access.admins"), "{why}");
    }

    #[test]
    fn a_base_fills_what_hive_cannot_say_but_not_another_platform() {
        let m = yaml("kind: ClusterPool\napiVersion: hive.openshift.io/v1\nmetadata: {name: ci}\nspec: {size: 1, platform: {aws: {region: eu-west-1}}}\n");
        let base = json!({"size": 9, "platform": {"aws": {"region": "us-east-1", "imageId": "ami-1", "instanceType": "m5.xlarge"}}});
        let i = translate(&m, Some(&base), Some("other")).expect("translated");
        assert_eq!(i.name, "other");
        assert_eq!(i.spec["size"], 1);
        assert_eq!(
            i.spec["platform"]["aws"],
            json!({"region": "eu-west-1", "imageId": "ami-1", "instanceType": "m5.xlarge"})
        );
        assert_eq!(i.needed, vec![]);
        let gcp = json!({"platform": {"gcp": {"project": "p"}}});
        let e = translate(&m, Some(&gcp), None).expect_err("refused");
        assert_eq!(e.message, "the base spec's platform is gcp but the ClusterPool's is aws");
    }

    #[test]
    fn with_the_reference_installer_the_image_set_and_template_become_its_settings() {
        use base64::Engine;
        let config = "apiVersion: v1\nmetadata:\n  name: placeholder\nbaseDomain: hive.example.com\ncontrolPlane:\n  \
                      name: master\n  replicas: 3\ncompute:\n- name: worker\n  replicas: 2\nplatform:\n  aws:\n    \
                      region: us-east-1\npullSecret: ''\nsshKey: ssh-ed25519 AAAA ci@example.com\n";
        let encoded = base64::engine::general_purpose::STANDARD.encode(config);
        let list = json!({"apiVersion": "v1", "kind": "List", "items": [
            {"apiVersion": "hive.openshift.io/v1", "kind": "ClusterPool", "metadata": {"name": "ci", "namespace": "hive"},
             "spec": {"size": 2, "baseDomain": "ci.example.com", "imageSetRef": {"name": "openshift-v4.18.1"},
                      "installConfigSecretTemplateRef": {"name": "ci-install-config"},
                      "pullSecretRef": {"name": "pull-secret"}, "installerEnv": [{"name": "X", "value": "1"}],
                      "platform": {"aws": {"region": "us-east-1", "credentialsSecretRef": {"name": "aws"}}}}},
            {"apiVersion": "hive.openshift.io/v1", "kind": "ClusterImageSet", "metadata": {"name": "openshift-v4.18.1"},
             "spec": {"releaseImage": "quay.io/openshift-release-dev/ocp-release:4.18.1-x86_64"}},
            {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "ci-install-config", "namespace": "hive"},
             "data": {"install-config.yaml": encoded}},
        ]});
        let installer = Installer {
            url: "https://abc.lambda-url.us-east-1.on.aws/apiary".into(),
            secret: "arn:aws:secretsmanager:us-east-1:123456789012:secret:apiary-installer-key".into(),
            pull_secret: None,
            ssh_key: None,
        };
        let i = translate_for(&list, None, None, Some(&installer)).expect("translated");
        assert_eq!(i.spec["provisioner"]["webhook"]["url"], installer.url.as_str());
        assert_eq!(i.spec["readiness"]["kubernetes"]["credentials"], "{outputs.kubeconfigSecretArn}");
        assert_eq!(i.spec["platform"]["aws"]["machineCount"], 5, "three masters and two workers");
        assert_eq!(i.needed, vec![], "the pool spec is whole: the installer launches the machines");
        let dropped: Vec<&str> = i.dropped.iter().map(|(f, _)| f.as_str()).collect();
        assert!(!dropped.iter().any(|f| f.contains("imageSetRef") || f.contains("pullSecretRef")), "{dropped:?}");
        assert!(dropped.contains(&"spec.installerEnv"), "{dropped:?}");
        let settings = i.installer_settings.expect("the installer's settings");
        assert_eq!(settings["releaseImage"], "quay.io/openshift-release-dev/ocp-release:4.18.1-x86_64");
        // The release is the pool's too, so that a bump of it replaces the pool's unclaimed clusters.
        assert_eq!(i.spec["release"], "quay.io/openshift-release-dev/ocp-release:4.18.1-x86_64");
        let template: Value =
            serde_saphyr::from_str(settings["installConfig"].as_str().expect("template")).expect("yaml");
        assert_eq!(
            (template["metadata"]["name"].as_str(), template["baseDomain"].as_str()),
            (Some("{clusterName}"), Some("{baseDomain}"))
        );
        assert!(template.get("pullSecret").is_none() && template.get("sshKey").is_none(), "{template}");
        let needed: Vec<&str> = i.settings_needed.iter().map(|(f, _)| f.as_str()).collect();
        assert_eq!(needed, ["installerSettings.sshKey", "installerSettings.pullSecret"]);

        let given = Installer {
            pull_secret: Some("arn:aws:secretsmanager:us-east-1:123456789012:secret:ci-pull".into()),
            ssh_key: Some("arn:aws:secretsmanager:us-east-1:123456789012:secret:ci-ssh".into()),
            ..installer
        };
        let i = translate_for(&list, None, None, Some(&given)).expect("translated");
        assert_eq!(i.settings_needed, vec![]);
        let settings = i.installer_settings.expect("settings");
        assert_eq!(
            (settings["pullSecret"].as_str(), settings["sshKey"].as_str()),
            (given.pull_secret.as_deref(), given.ssh_key.as_deref())
        );

        // Without the image set in the file, its release image is what is needed.
        let mut alone = list.clone();
        alone["items"].as_array_mut().map(|items| items.remove(1));
        let i = translate_for(&alone, None, None, Some(&given)).expect("translated");
        assert_eq!(i.settings_needed.first().map(|(f, _)| f.as_str()), Some("installerSettings.releaseImage"));
    }

    #[test]
    fn other_kinds_are_refused() {
        let e = translate(&json!({"kind": "ClusterDeployment"}), None, None).expect_err("refused");
        assert!(e.message.contains("\"ClusterDeployment\""), "{}", e.message);
    }
}
