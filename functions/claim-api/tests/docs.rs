//! Every pool spec the README and docs/ show is one the API takes: each ```json block, whole or as a fragment laid
//! over a small AWS pool, is put through the API's handler by an admin and must be created, with each of its fields
//! stored as written. (The pages' shell examples run against `make run` in tests/doc_examples.py.)

use std::path::{Path, PathBuf};

use apiary_testkit::{World, ADMIN};
use chrono::{TimeZone, Utc};
use serde_json::{json, Map, Value};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// (page, line, text) of every ```json block of the README and docs/.
fn json_blocks() -> Vec<(String, usize, String)> {
    let mut pages = vec![root().join("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root().join("docs"))
        .expect("docs/")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    docs.sort();
    pages.extend(docs);
    let mut out = Vec::new();
    for page in pages {
        let text = std::fs::read_to_string(&page).expect("page");
        let name = page.strip_prefix(root()).unwrap_or(&page).display().to_string();
        let mut block: Option<(usize, String)> = None;
        for (i, line) in text.lines().enumerate() {
            match (&mut block, line.trim_end()) {
                (None, "```json") => block = Some((i + 1, String::new())),
                (Some((start, body)), "```") => {
                    out.push((name.clone(), *start, std::mem::take(body)));
                    block = None;
                }
                (Some((_, body)), l) => {
                    body.push_str(l);
                    body.push('\n');
                }
                (None, _) => {}
            }
        }
    }
    out
}

/// The small pool a fragment is laid over.
fn base() -> Map<String, Value> {
    let spec = json!({
        "size": 2,
        "platform": { "aws": { "region": "eu-west-1", "imageId": "ami-0123456789abcdef0", "instanceType": "m6i.xlarge" } }
    });
    spec.as_object().cloned().expect("object")
}

/// The spec a block shows: a whole spec as it is, a fragment (`"field": …`) over [`base`].
fn spec_of(text: &str) -> Result<Value, String> {
    let trimmed = text.trim();
    if trimmed.starts_with('{') {
        return serde_json::from_str(trimmed).map_err(|e| e.to_string());
    }
    let fragment: Map<String, Value> = serde_json::from_str(&format!("{{{trimmed}}}")).map_err(|e| e.to_string())?;
    let mut spec = base();
    spec.extend(fragment);
    Ok(Value::Object(spec))
}

/// An admin's `PUT uri` with `body`: the status and the JSON answer.
async fn put(deps: &apiary_ports::Deps, uri: &str, body: &str) -> (u16, Value) {
    let res = claim_api::handle(deps, claim_api::api_request("PUT", uri, Some(ADMIN), body.as_bytes().to_vec())).await;
    let status = res.status().as_u16();
    let answer = match res.into_body() {
        lambda_http::Body::Text(t) => serde_json::from_str(&t).unwrap_or(Value::String(t)),
        other => Value::String(format!("{other:?}")),
    };
    (status, answer)
}

/// Whether every value `shown` holds is in `stored` as written (objects may hold more).
fn holds(stored: &Value, shown: &Value) -> bool {
    match (stored, shown) {
        (Value::Object(s), Value::Object(w)) => w.iter().all(|(k, v)| s.get(k).is_some_and(|x| holds(x, v))),
        (s, w) => s == w,
    }
}

#[tokio::test]
async fn every_pool_spec_the_docs_show_is_one_the_api_takes() {
    let w = World::new(Utc.with_ymd_and_hms(2026, 11, 25, 9, 0, 0).single().expect("time"));
    // The stack the docs' examples assume allows pools in their member account (MemberAccountIds).
    let mut config = apiary_ports::Config::named("apiary", &[ADMIN]);
    config.member_roles.accounts = vec!["210987654321".into()];
    let deps = w.deps(config);
    let blocks = json_blocks();
    assert!(blocks.len() >= 8, "the docs show pool specs: found {}", blocks.len());
    let mut wrong = Vec::new();
    for (n, (page, line, text)) in blocks.iter().enumerate() {
        let spec = match spec_of(text) {
            Ok(s) => s,
            Err(e) => {
                wrong.push(format!("{page}:{line}: not JSON: {e}"));
                continue;
            }
        };
        let (status, body) = put(&deps, &format!("/pools/docs-{n}"), &spec.to_string()).await;
        if status != 201 {
            wrong.push(format!("{page}:{line}: {status} {body}"));
        } else if !holds(&body["spec"], &spec) {
            wrong.push(format!("{page}:{line}: stored as {} (shown: {spec})", body["spec"]));
        }
    }
    assert!(wrong.is_empty(), "pool specs the docs show that the API refuses:\n{}", wrong.join("\n"));
}

#[tokio::test]
async fn the_error_docs_api_shows_is_the_apis_answer() {
    // docs/api.md: "`PUT /pools/ci` with `BODY` is answered 400:" and the answer in the ```text block after it.
    let text = std::fs::read_to_string(root().join("docs/api.md")).expect("docs/api.md");
    let (_, rest) = text.split_once("`PUT /pools/ci` with `").expect("the example request");
    let (body, rest) = rest.split_once('`').expect("its body");
    let shown = rest.split("```text\n").nth(1).and_then(|r| r.split("```").next()).expect("the example answer");
    let shown: Value = serde_json::from_str(shown).expect("the answer shown is JSON");
    let w = World::new(Utc.with_ymd_and_hms(2026, 11, 25, 9, 0, 0).single().expect("time"));
    assert_eq!(put(&w.default_deps(900), "/pools/ci", body).await, (400, shown));
}

#[test]
fn a_fragment_is_laid_over_the_base_and_a_misspelt_field_shows() {
    let spec = spec_of(r#""runningCount": 1, "size": 3"#).expect("fragment");
    assert_eq!((spec["size"].as_i64(), spec["runningCount"].as_i64()), (Some(3), Some(1)));
    assert_eq!(spec["platform"]["aws"]["region"], "eu-west-1");
    assert!(spec_of(r#""size": 3,"#).is_err(), "a fragment that is not JSON is named");
    assert!(holds(&json!({"a": {"b": 1, "c": 2}}), &json!({"a": {"b": 1}})));
    assert!(!holds(&json!({"a": {"b": 1}}), &json!({"a": {"b": 2}})));
}
