//! `pool import`: a Hive `ClusterPool` manifest as an Apiary pool, with what could not be carried over and why.
//!
//! The sizing and lifecycle fields map one to one (seed 000, 002 and 003 name them as Hive does). What Hive keeps
//! in Kubernetes secrets, and what its installer needs (the release image, the install-config template, the pull
//! secret), has no place in a pool spec: Apiary never holds secrets, and installs through your installer
//! (`provisioner.webhook`) or from a machine image. A base spec (`--into`) supplies what the manifest cannot say.

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
    let kind = manifest["kind"].as_str().unwrap_or_default();
    if kind != "ClusterPool" {
        let kind = if kind.is_empty() { "missing".to_owned() } else { format!("{kind:?}") };
        return Err(Failure::usage(format!("not a Hive ClusterPool manifest (kind is {kind})")));
    }
    let mut dropped = vec![];
    let mut leave = |field: String, why: &str| dropped.push((field, why.to_owned()));
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
            "claimLifetime" => {
                let mut lifetime = Map::new();
                for (k, v) in value.as_object().unwrap_or(&empty) {
                    match k.as_str() {
                        "default" | "maximum" => {
                            lifetime.insert(k.clone(), v.clone());
                        }
                        _ => leave(format!("spec.claimLifetime.{k}"), why_not(k)),
                    }
                }
                spec.insert("claimLifetime".into(), Value::Object(lifetime));
            }
            "hibernationConfig" => {
                for (k, v) in value.as_object().unwrap_or(&empty) {
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
            "inventory" => inventory(value, &mut spec, &mut leave),
            "labels" => {
                for (k, v) in value.as_object().unwrap_or(&empty) {
                    labels.insert(k.clone(), v.clone());
                }
            }
            "platform" => platform(value, &mut spec, &mut leave),
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
    let needed = check(&merged);
    let notes = NOTES
        .iter()
        .filter(|(field, _)| !set(&merged, field))
        .map(|(field, what)| ((*field).to_owned(), (*what).to_owned()))
        .collect();
    Ok(Import { name, spec: merged, dropped, needed, notes })
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
    fn other_kinds_are_refused() {
        let e = translate(&json!({"kind": "ClusterDeployment"}), None, None).expect_err("refused");
        assert!(e.message.contains("\"ClusterDeployment\""), "{}", e.message);
    }
}
