//! A caller's document read strictly. The stored types take fields they do not know, so that an item or message a
//! later release wrote is read during an update instead of failing its reader (and the stored types' top level
//! keeps them, [`crate::model::Later`], so that writing the item back does not drop them); what a caller sends is
//! still held to the fields the types have: an unknown one is an error naming its path, as a value of the wrong
//! type is (at a stored type's top level, by [`crate::validate::validate_spec`]).

use serde::de::DeserializeOwned;
use serde_json::Value;

use super::FieldError;

/// `value` as a `T`; every field `T` does not have, or the first value it cannot take, named by its path
/// (`access.claimant`, `inventory.clusterDeployments[2].name`).
pub fn strictly<T: DeserializeOwned>(value: &Value) -> Result<T, Vec<FieldError>> {
    let mut unknown = Vec::new();
    let mut note = |path: serde_ignored::Path<'_>| unknown.push(field_of(value, &steps(&path)));
    let ignoring = serde_ignored::Deserializer::new(value, &mut note);
    let parsed: Result<T, _> = serde_path_to_error::deserialize(ignoring);
    match parsed {
        Err(e) => {
            let path = e.path().to_string();
            let message = e.into_inner().to_string();
            // A missing field is named by the message, not the path (which stops at its parent).
            let missing = message.strip_prefix("missing field `").and_then(|m| m.split('`').next());
            let field = match (path.as_str(), missing) {
                ("." | "", Some(m)) => m.to_owned(),
                ("." | "", None) => "body".to_owned(),
                (p, Some(m)) => format!("{p}.{m}"),
                (p, None) => p.to_owned(),
            };
            Err(vec![FieldError::new(&field, message)])
        }
        Ok(_) if !unknown.is_empty() => {
            Err(unknown.into_iter().map(|field| FieldError::new(&field, "unknown field")).collect())
        }
        Ok(parsed) => Ok(parsed),
    }
}

/// One step of a path: a key of an object, or an index of a list.
enum Step {
    Key(String),
    Index(usize),
}

/// The keys and indexes of `path`, from the root.
fn steps(path: &serde_ignored::Path<'_>) -> Vec<Step> {
    use serde_ignored::Path;
    match path {
        Path::Root => Vec::new(),
        Path::Seq { parent, index } => {
            let mut s = steps(parent);
            s.push(Step::Index(*index));
            s
        }
        Path::Map { parent, key } => {
            let mut s = steps(parent);
            s.push(Step::Key(key.clone()));
            s
        }
        Path::Some { parent } | Path::NewtypeStruct { parent } | Path::NewtypeVariant { parent } => steps(parent),
    }
}

/// The path of `steps` in `value` in the JSON's own terms, keys joined by dots and indexes in brackets, with the
/// name of each one-of-several choice (`platform.aws`) that the steps pass through without naming it.
fn field_of(value: &Value, steps: &[Step]) -> String {
    let mut field = String::new();
    let mut at = value;
    for step in steps {
        match step {
            Step::Index(i) => {
                field.push_str(&format!("[{i}]"));
                at = at.get(i).unwrap_or(&Value::Null);
            }
            Step::Key(key) => {
                if let Some(Value::Object(o)) = Some(at).filter(|v| v.get(key).is_none()) {
                    // An enum's variant, `{"aws": {…}}`: the key is inside it.
                    if let [(choice, inner)] = o.iter().collect::<Vec<_>>()[..] {
                        if inner.get(key).is_some() {
                            field.push_str(&format!("{}{choice}", if field.is_empty() { "" } else { "." }));
                            at = inner;
                        }
                    }
                }
                field.push_str(&format!("{}{key}", if field.is_empty() { "" } else { "." }));
                at = at.get(key).unwrap_or(&Value::Null);
            }
        }
    }
    field
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::model::PoolSpec;

    fn spec() -> Value {
        json!({ "size": 1, "platform": { "aws": { "region": "us-east-1", "imageId": "ami-1", "instanceType": "t3" } } })
    }

    #[test]
    fn a_field_the_type_does_not_have_is_named_by_its_path() {
        let mut s = spec();
        s["access"] = json!({ "claimant": ["*"] });
        s["platform"]["aws"]["regoin"] = json!("x");
        let errors = strictly::<PoolSpec>(&s).expect_err("two unknown fields");
        let fields: Vec<&str> = errors.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(fields, ["access.claimant", "platform.aws.regoin"]);
        assert!(errors.iter().all(|e| e.message == "unknown field"));
    }

    #[test]
    fn a_value_of_the_wrong_type_and_a_missing_field_are_named_as_before() {
        let mut s = spec();
        s["size"] = json!("one");
        assert_eq!(strictly::<PoolSpec>(&s).expect_err("a string")[0].field, "size");
        let errors = strictly::<PoolSpec>(&json!({ "size": 1 })).expect_err("no platform");
        assert_eq!(errors[0].field, "platform");
    }

    #[test]
    fn a_stored_spec_with_a_field_of_a_later_release_keeps_it_and_a_caller_may_not_send_it() {
        let mut s = spec();
        s["aLaterOption"] = json!({ "on": true });
        let read: PoolSpec = serde_json::from_value(s.clone()).expect("the stored read takes it");
        assert_eq!(read.size, 1);
        assert_eq!(serde_json::to_value(&read).expect("json")["aLaterOption"], json!({ "on": true }), "written back");
        // A caller's spec: the top level's later fields are kept (they are the stored type's), and refused by
        // validation naming each; a nested unknown field is refused as it is read.
        let sent: PoolSpec = strictly(&s).expect("read");
        let refused = crate::validate::validate_spec(&sent).expect_err("a caller may not send it");
        assert_eq!((refused[0].field.as_str(), refused[0].message.as_str()), ("aLaterOption", "unknown field"));
        assert!(crate::validate::validate_spec(&strictly::<PoolSpec>(&spec()).expect("read")).is_ok());
    }
}
