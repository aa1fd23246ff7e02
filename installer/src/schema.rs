//! openshift-install's own InstallConfig schema, and a document checked against it.
//!
//! `schema/install.openshift.io_installconfigs.yaml` is the installer's published CRD
//! (openshift/installer `data/data/install.openshift.io_installconfigs.yaml`, vendored by commit: see
//! `schema/README.md`). Its `openAPIV3Schema` is a JSON Schema; [`Schema::check`] validates a rendered
//! install-config with it, so a template is refused for what openshift-install itself would refuse at the first
//! step, before a job is paid for.
//!
//! openshift-install reads install-config.yaml strictly: a field it does not know is an error. The CRD leaves
//! that to Kubernetes' pruning, so every object of the schema that lists its properties (and does not keep unknown
//! fields) is closed here (`additionalProperties: false`): a misspelt `platfrom` is named, not ignored.

use std::sync::OnceLock;

use serde_json::{Map, Value};

/// The vendored CRD.
pub const CRD: &str = include_str!("../schema/install.openshift.io_installconfigs.yaml");

/// The machine pools, whose `platform` the CRD marks required only because its Go field has no `omitempty`:
/// openshift-install fills a pool's platform in from the defaults, and its own examples leave it out.
const MACHINE_POOLS: [&str; 3] = ["/properties/controlPlane", "/properties/compute/items", "/properties/arbiter"];

/// What is wrong with a document: the field (dotted, `platform.aws.region`; empty for the whole) and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The field, as install-config.yaml spells it (`compute[0].replicas`).
    pub field: String,
    /// Why.
    pub why: String,
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.field.is_empty() {
            write!(f, "{}", self.why)
        } else {
            write!(f, "{}: {}", self.field, self.why)
        }
    }
}

/// The compiled schema.
pub struct Schema {
    validator: jsonschema::Validator,
}

impl Schema {
    /// The vendored schema, compiled once per process.
    pub fn installer() -> Result<&'static Schema, String> {
        static SCHEMA: OnceLock<Result<Schema, String>> = OnceLock::new();
        SCHEMA.get_or_init(|| Self::from_crd(CRD)).as_ref().map_err(Clone::clone)
    }

    /// The schema of a CRD's first version.
    pub fn from_crd(crd: &str) -> Result<Self, String> {
        let crd: Value = serde_saphyr::from_str(crd).map_err(|e| format!("the InstallConfig CRD: {e}"))?;
        let mut schema = crd
            .pointer("/spec/versions/0/schema/openAPIV3Schema")
            .cloned()
            .ok_or("the InstallConfig CRD has no spec.versions[0].schema.openAPIV3Schema")?;
        close(&mut schema);
        for pool in MACHINE_POOLS {
            if let Some(Value::Array(required)) = schema.pointer_mut(&format!("{pool}/required")) {
                required.retain(|r| r != "platform");
            }
        }
        let validator = jsonschema::options()
            .with_draft(jsonschema::Draft::Draft4)
            .build(&schema)
            .map_err(|e| format!("the InstallConfig schema: {e}"))?;
        Ok(Self { validator })
    }

    /// Every problem the schema finds in `doc`, in document order, at most `limit`.
    pub fn check(&self, doc: &Value, limit: usize) -> Vec<Problem> {
        let mut problems: Vec<Problem> = self
            .validator
            .iter_errors(doc)
            .map(|e| {
                let mut field = dotted(&e.instance_path().to_string());
                let mut why = e.to_string();
                // An unknown or missing field is named as the field, not as its parent.
                let child = |name: String| if field.is_empty() { name } else { format!("{field}.{name}") };
                if let Some(name) = unexpected(&why) {
                    field = child(name);
                    why = "is not a field of install-config (openshift-install refuses unknown fields)".to_owned();
                } else if let Some(name) = missing(&why) {
                    field = child(name);
                    why = "is required".to_owned();
                }
                Problem { field, why }
            })
            .collect();
        problems.sort_by(|a, b| a.field.cmp(&b.field));
        problems.dedup();
        problems.truncate(limit);
        problems
    }
}

/// Closes every object schema that lists its properties.
fn close(schema: &mut Value) {
    match schema {
        Value::Object(map) => {
            let keeps_unknown = map.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true));
            if map.contains_key("properties") && !map.contains_key("additionalProperties") && !keeps_unknown {
                map.insert("additionalProperties".to_owned(), Value::Bool(false));
            }
            for (key, value) in map.iter_mut() {
                // `properties` maps names to schemas: close the schemas, never read a property named like a
                // keyword as one.
                if key == "properties" {
                    if let Value::Object(props) = value {
                        props.values_mut().for_each(close);
                    }
                } else if key != "enum" && key != "default" && key != "example" {
                    close(value);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(close),
        _ => {}
    }
}

/// `/compute/0/replicas` as `compute[0].replicas`.
fn dotted(pointer: &str) -> String {
    let mut out = String::new();
    for segment in pointer.split('/').skip(1) {
        let segment = segment.replace("~1", "/").replace("~0", "~");
        if segment.parse::<usize>().is_ok() {
            out.push_str(&format!("[{segment}]"));
        } else {
            if !out.is_empty() {
                out.push('.');
            }
            out.push_str(&segment);
        }
    }
    out
}

/// The name in jsonschema's "Additional properties are not allowed ('x' was unexpected)".
fn unexpected(message: &str) -> Option<String> {
    let start = message.find("('")? + 2;
    let end = message[start..].find("' ")? + start;
    message.contains("Additional properties").then(|| message[start..end].to_owned())
}

/// The name in jsonschema's "\"x\" is a required property".
fn missing(message: &str) -> Option<String> {
    let name = message.strip_suffix(" is a required property")?;
    Some(name.trim_matches('"').to_owned())
}

/// `doc` as a JSON object, or the problem with it.
pub fn object(doc: &Value) -> Result<&Map<String, Value>, Problem> {
    doc.as_object()
        .ok_or_else(|| Problem { field: String::new(), why: "install-config must be a mapping of fields".into() })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn valid() -> Value {
        json!({
            "apiVersion": "v1",
            "metadata": {"name": "ci-1"},
            "baseDomain": "ci.example.com",
            "controlPlane": {"name": "master", "replicas": 3},
            "compute": [{"name": "worker", "replicas": 2, "platform": {"aws": {"type": "m6i.xlarge"}}}],
            "networking": {"machineNetwork": [{"cidr": "10.0.0.0/16"}]},
            "platform": {"aws": {"region": "us-east-1"}},
            "pullSecret": "{\"auths\":{}}",
            "sshKey": "ssh-ed25519 AAAA",
        })
    }

    fn fields(doc: &Value) -> Vec<String> {
        let schema = Schema::installer().expect("the vendored schema compiles");
        schema.check(doc, 10).into_iter().map(|p| p.field).collect()
    }

    #[test]
    fn a_valid_install_config_passes() {
        assert_eq!(fields(&valid()), Vec::<String>::new());
    }

    #[test]
    fn the_vendored_crd_is_the_one_its_readme_names() {
        use sha2::Digest;
        let digest = sha2::Sha256::digest(CRD.as_bytes());
        let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(hex, "4019e7b7858c9dc5563cea79c26bfa1e042cdbf4ac6389cc334dafed78c2fd2b", "see schema/README.md");
    }

    #[test]
    fn each_problem_names_its_field() {
        let mut doc = valid();
        doc["platform"]["aws"].as_object_mut().map(|aws| aws.remove("region"));
        assert_eq!(fields(&doc), ["platform.aws.region"]);
        let mut doc = valid();
        doc["compute"][0]["replicas"] = json!("two");
        assert_eq!(fields(&doc), ["compute[0].replicas"]);
        let mut doc = valid();
        doc["platfrom"] = doc["platform"].clone();
        assert_eq!(fields(&doc), ["platfrom"]);
        let mut doc = valid();
        doc["platform"]["aws"]["regoin"] = json!("us-east-1");
        assert_eq!(fields(&doc), ["platform.aws.regoin"]);
        let mut doc = valid();
        doc["controlPlane"]["hyperthreading"] = json!("Sometimes");
        assert_eq!(fields(&doc), ["controlPlane.hyperthreading"]);
        let mut doc = valid();
        doc.as_object_mut().map(|d| d.remove("pullSecret"));
        assert_eq!(fields(&doc), ["pullSecret"]);
    }

    #[test]
    fn metadata_stays_open_as_kubernetes_object_metadata() {
        let mut doc = valid();
        doc["metadata"]["annotations"] = json!({"team": "ci"});
        assert_eq!(fields(&doc), Vec::<String>::new());
    }

    #[test]
    fn pointers_read_as_install_config_spells_fields() {
        assert_eq!(dotted("/compute/0/platform/aws/zones/1"), "compute[0].platform.aws.zones[1]");
        assert_eq!(dotted(""), "");
    }
}
