//! A pool's extra manifests: Kubernetes objects the installed cluster starts with (a MachineConfig, a
//! ConfigMap, an operator's Subscription), as Hive's `manifestsConfigMapRef` gives them.
//!
//! Each is one YAML document, templated as the install-config is ([`crate::template`]). Before any job runs, each
//! is rendered for the cluster and checked to be one mapping with a non-empty `apiVersion`, a `kind` and a
//! `metadata.name` Kubernetes takes; no two may be the same object. A manifest that fails is refused naming it
//! (`manifests[2]: metadata.name: …`), so a typo costs an answer, not an hour's install.
//!
//! The job runs `openshift-install create manifests`, copies them into the install directory's `openshift/`
//! ([`DIR`], [`Manifest::file`]), then `create cluster`: openshift-install takes what it finds in `openshift/` as
//! part of the cluster's first configuration.

use serde_json::Value;

use crate::template::{render, Values};

/// Where the rendered manifests wait in the install directory until the job copies them into `openshift/`.
pub const DIR: &str = ".apiary/manifests";
/// The most manifests a pool may name.
pub const MAX_MANIFESTS: usize = 64;

/// One manifest rendered for a cluster.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Manifest {
    /// Its file's name in `openshift/`: `99_apiary-<index>-<kind>-<name>.yaml`, so they sort after
    /// openshift-install's own and in the pool's order.
    pub file: String,
    /// The document, as rendered.
    pub text: String,
}

impl Manifest {
    /// Its path inside the install directory while it waits for the job.
    pub fn waiting(&self) -> String {
        format!("{DIR}/{}", self.file)
    }
}

/// `templates` rendered for one cluster and checked; `Err` names the first that fails (`manifests[i]: …`).
pub fn rendered(templates: &[String], values: &Values<'_>) -> Result<Vec<Manifest>, String> {
    let mut out: Vec<Manifest> = Vec::with_capacity(templates.len());
    let mut objects: Vec<(String, String, String)> = Vec::with_capacity(templates.len());
    for (i, template) in templates.iter().enumerate() {
        let field = format!("manifests[{i}]");
        let text = render(template, values).map_err(|refused| format!("{field}: {refused}"))?;
        let doc: Value =
            serde_saphyr::from_str(&text).map_err(|e| format!("{field}: not one YAML document once rendered: {e}"))?;
        let (kind, namespace, name) = object(&doc).map_err(|why| format!("{field}: {why}"))?;
        let key = (kind.to_ascii_lowercase(), namespace, name.clone());
        if let Some(first) = objects.iter().position(|o| *o == key) {
            return Err(format!("{field}: the same object as manifests[{first}] ({kind} {name})"));
        }
        out.push(Manifest { file: format!("99_apiary-{i:02}-{}-{name}.yaml", key.0), text });
        objects.push(key);
    }
    Ok(out)
}

/// The object `doc` names: its kind, namespace (empty if none) and name; `Err` names the field that is wrong.
fn object(doc: &Value) -> Result<(String, String, String), String> {
    let Some(map) = doc.as_object() else {
        return Err("is not a mapping: a manifest is one Kubernetes object".to_owned());
    };
    let text = |field: &str, value: Option<&Value>| match value {
        Some(Value::String(s)) if !s.trim().is_empty() => Ok(s.clone()),
        Some(_) => Err(format!("{field}: must be a non-empty string")),
        None => Err(format!("{field}: is required")),
    };
    text("apiVersion", map.get("apiVersion"))?;
    let kind = text("kind", map.get("kind"))?;
    if !kind.starts_with(|c: char| c.is_ascii_alphabetic()) || !kind.chars().all(|c| c.is_ascii_alphanumeric()) {
        return Err(format!("kind: {kind:?} is not a Kubernetes kind (letters and digits, ConfigMap)"));
    }
    let metadata = map.get("metadata");
    if metadata.is_some_and(|m| !m.is_object()) {
        return Err("metadata: must be a mapping".to_owned());
    }
    let name = text("metadata.name", metadata.and_then(|m| m.get("name")))?;
    if !subdomain(&name) {
        return Err(format!(
            "metadata.name: {name:?} is not a Kubernetes name (lowercase letters, digits, '-' and '.', at most 253)"
        ));
    }
    let namespace = match metadata.and_then(|m| m.get("namespace")) {
        None => String::new(),
        Some(_) => {
            let namespace = text("metadata.namespace", metadata.and_then(|m| m.get("namespace")))?;
            if namespace.len() > 63 || namespace.contains('.') || !subdomain(&namespace) {
                return Err(format!("metadata.namespace: {namespace:?} is not a namespace's name (a DNS label)"));
            }
            namespace
        }
    };
    Ok((kind, namespace, name))
}

/// An RFC 1123 subdomain, as Kubernetes takes most objects' names.
fn subdomain(name: &str) -> bool {
    (1..=253).contains(&name.len())
        && name.split('.').all(|label| {
            !label.is_empty()
                && label.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn check(templates: &[&str]) -> Result<Vec<Manifest>, String> {
        let labels = BTreeMap::from([("team".to_owned(), "ci".to_owned())]);
        let parameters = BTreeMap::new();
        let values = Values {
            cluster_name: "ci-1",
            base_domain: Some("ci.example.com"),
            labels: &labels,
            parameters: &parameters,
        };
        rendered(&templates.iter().map(|t| (*t).to_owned()).collect::<Vec<_>>(), &values)
    }

    const CONFIGMAP: &str =
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: team-{labels.team}\n  namespace: openshift-config\ndata:\n  cluster: {clusterName}\n";

    #[test]
    fn manifests_are_rendered_and_named_in_the_pools_order() {
        let chrony = "apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfig\nmetadata:\n  name: 99-worker-chrony\n  labels:\n    machineconfiguration.openshift.io/role: worker\nspec: {}\n";
        let out = check(&[CONFIGMAP, chrony]).expect("rendered");
        assert_eq!(out[0].file, "99_apiary-00-configmap-team-ci.yaml");
        assert!(out[0].text.contains("cluster: ci-1"), "{}", out[0].text);
        assert_eq!(out[1].file, "99_apiary-01-machineconfig-99-worker-chrony.yaml");
        assert_eq!(out[1].waiting(), ".apiary/manifests/99_apiary-01-machineconfig-99-worker-chrony.yaml");
        assert_eq!(check(&[]).expect("none"), vec![]);
    }

    #[test]
    fn a_bad_manifest_is_refused_naming_it_and_its_field() {
        let why = |templates: &[&str]| check(templates).expect_err("refused");
        let second = |bad: &str| why(&[CONFIGMAP, bad]);
        assert!(second("kind: ConfigMap\nmetadata:\n  name: x\n").starts_with("manifests[1]: apiVersion: is required"));
        assert!(second("apiVersion: v1\nmetadata:\n  name: x\n").starts_with("manifests[1]: kind: is required"));
        assert!(second("apiVersion: v1\nkind: ConfigMap\n").starts_with("manifests[1]: metadata.name: is required"));
        assert!(second("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: \"\"\n")
            .starts_with("manifests[1]: metadata.name:"));
        assert!(
            second("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: Big_Name\n").contains("not a Kubernetes name")
        );
        assert!(second("apiVersion: v1\nkind: Config Map\nmetadata:\n  name: x\n").starts_with("manifests[1]: kind:"));
        assert!(
            second("apiVersion: 1\nkind: ConfigMap\nmetadata:\n  name: x\n").starts_with("manifests[1]: apiVersion:")
        );
        assert!(second("apiVersion: v1\nkind: ConfigMap\nmetadata: x\n").starts_with("manifests[1]: metadata:"));
        assert!(second("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n  namespace: a.b\n")
            .starts_with("manifests[1]: metadata.namespace:"));
        assert!(second("- apiVersion: v1\n").starts_with("manifests[1]: is not a mapping"));
        assert!(second("a: [\n").starts_with("manifests[1]: not one YAML document"));
        assert!(second("a: 1\n---\nb: 2\n").starts_with("manifests[1]: not one YAML document"));
        assert!(second("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {clustername}\n")
            .starts_with("manifests[1]: clustername:"));
        // The same object twice, whatever the case of its kind.
        let twice = why(&[CONFIGMAP, &CONFIGMAP.replace("kind: ConfigMap", "kind: configmap")]);
        assert!(twice.starts_with("manifests[1]: the same object as manifests[0]"), "{twice}");
        // The same name in another namespace is another object.
        assert!(check(&[CONFIGMAP, &CONFIGMAP.replace("openshift-config", "default")]).is_ok());
    }
}
