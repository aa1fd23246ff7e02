//! `apiary pool apply -f PATH...`: pools kept as files in a repository, applied from a pipeline.
//!
//! Every file given (a directory gives its `.json`, `.yaml` and `.yml` files) is one pool, named by the command's
//! `NAME` (one file only), else the file's `name`, else the file's name without its extension. Every file is read
//! and checked by the planner's own rules (`validate_spec`, and `validate_update` over the pool as it is) before
//! anything is written: a refused file is named with each field's error, and nothing is applied.
//!
//! `--diff` changes nothing: it prints, per pool, the fields the file would change and the clusters the change
//! would replace, as the planner decides it ([`apiary_planner::change`]), and exits 7 when anything would change.
//! `--prune KEY=VALUE,...` also deletes the stack's pools carrying those labels that no file names; every file
//! must carry them too, so that one team's files prune only that team's pools.

use std::path::{Path, PathBuf};

use apiary_planner::change::{changed_fields, replaced, FieldChange};
use apiary_planner::{validate_spec, validate_update, Cluster, DeleteReason, PoolSpec};
use serde_json::{json, Map, Value};

use crate::api::ApiError;
use crate::commands::Ctx;
use crate::document::Document;
use crate::error::{Exit, Failure, Result};

/// One pool's file, read and checked.
pub struct PoolFile {
    /// The file.
    pub doc: Document,
    /// The pool's name.
    pub name: String,
    /// The spec as the file writes it (what is sent).
    pub spec: Value,
    /// The spec as the planner reads it.
    pub parsed: PoolSpec,
    /// Where the spec is in the file (`spec.` when the file is a pool as `pool get` prints it).
    pub prefix: &'static str,
}

/// What applying a file does to its pool.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// The pool is new.
    Created,
    /// The pool changes.
    Changed {
        /// The fields it changes.
        fields: Vec<FieldChange>,
        /// The clusters the reconcile replaces for it, with why.
        replaced: Vec<(String, DeleteReason)>,
    },
    /// The file says what the pool is already.
    Unchanged,
}

/// The files `paths` name: each file, and each `.json`, `.yaml` and `.yml` file of each directory, in name order.
pub fn expand(paths: &[PathBuf]) -> Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for path in paths {
        if !path.is_dir() {
            files.push(path.clone());
            continue;
        }
        let entries = std::fs::read_dir(path).map_err(|e| Failure::usage(format!("{}: {e}", path.display())))?;
        let mut found: Vec<PathBuf> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.is_file() && p.extension().is_some_and(|x| x == "json" || x == "yaml" || x == "yml"))
            .collect();
        if found.is_empty() {
            return Err(Failure::usage(format!("{}: no .json, .yaml or .yml file in it", path.display())));
        }
        found.sort();
        files.extend(found);
    }
    Ok(files)
}

/// Reads and checks every file of `paths`, each one pool; `name` names the pool of a single file.
pub fn read(name: Option<&str>, paths: &[PathBuf]) -> Result<Vec<PoolFile>> {
    let files = expand(paths)?;
    if name.is_some() && files.len() != 1 {
        return Err(Failure::usage(format!("NAME names one pool, but -f gives {} files: leave NAME out", files.len())));
    }
    let docs = files.iter().map(|path| Document::read(path)).collect::<Result<Vec<_>>>()?;
    checked(name, docs)
}

/// `docs` as pools, each checked by the planner's rules; `Err` lists every refusal, and names a pool named twice.
pub fn checked(name: Option<&str>, docs: Vec<Document>) -> Result<Vec<PoolFile>> {
    let mut out: Vec<PoolFile> = Vec::with_capacity(docs.len());
    let mut refused = Vec::new();
    for doc in docs {
        match pool_file(name, doc) {
            Ok(file) => {
                if let Some(first) = out.iter().find(|f| f.name == file.name) {
                    return Err(Failure::usage(format!(
                        "{} and {} both name pool {}",
                        first.doc.path.display(),
                        file.doc.path.display(),
                        file.name
                    )));
                }
                out.push(file);
            }
            Err(why) => refused.extend(why),
        }
    }
    refuse_if_any(refused)?;
    Ok(out)
}

/// `doc` as a pool: its name, and its spec as sent and as the planner reads it; `Err`: each thing wrong with it.
fn pool_file(name: Option<&str>, doc: Document) -> std::result::Result<PoolFile, Vec<String>> {
    // A document with a `spec` is a pool as `pool get` or `pool import` print it; otherwise it is the spec.
    let (spec, prefix) = match doc.value.get("spec") {
        Some(spec) => (spec.clone(), "spec."),
        None => (doc.value.clone(), ""),
    };
    let path = doc.path.display().to_string();
    let named = name.map(str::to_owned).or_else(|| doc.value.get("name").and_then(Value::as_str).map(str::to_owned));
    let Some(name) = named.or_else(|| stem(&doc.path)) else {
        return Err(vec![format!("{path}: name the pool: apiary pool apply NAME -f FILE (the file has no name)")]);
    };
    if let Err(e) = apiary_planner::validate::validate_name("name", &name) {
        return Err(vec![format!("{path}: the pool's name {name:?}: {}", e.message)]);
    }
    let parsed: PoolSpec = serde_json::from_value(spec.clone()).map_err(|e| vec![format!("{path}: {e}")])?;
    if let Err(errors) = validate_spec(&parsed) {
        return Err(errors.iter().map(|e| doc.place(&format!("{prefix}{}", e.field), &e.message)).collect());
    }
    Ok(PoolFile { doc, name, spec, parsed, prefix })
}

fn stem(path: &Path) -> Option<String> {
    (path != Path::new("-")).then(|| path.file_stem()?.to_str().map(str::to_owned)).flatten()
}

/// Nothing is applied when a file is refused: every refusal is listed.
fn refuse_if_any(refused: Vec<String>) -> Result<()> {
    match refused.as_slice() {
        [] => Ok(()),
        [one] => Err(Failure::usage(format!("{one}; nothing was applied"))),
        many => {
            let mut failure = Failure::usage(format!("{} refusals; nothing was applied", many.len()));
            failure.details = many.to_vec();
            Err(failure)
        }
    }
}

/// `--prune`'s labels checked against `files`: every file must carry each of them, so that the pools pruned are
/// the ones these files would own.
fn carried(files: &[PoolFile], labels: &Map<String, Value>) -> Result<()> {
    let refused: Vec<String> = files
        .iter()
        .filter(|f| labels.iter().any(|(k, v)| f.parsed.labels.get(k).map(|l| json!(l)) != Some(v.clone())))
        .map(|f| {
            format!(
                "{}: pool {} does not carry the labels --prune keeps to ({})",
                f.doc.path.display(),
                f.name,
                said(labels)
            )
        })
        .collect();
    refuse_if_any(refused)
}

fn said(labels: &Map<String, Value>) -> String {
    labels.iter().map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default())).collect::<Vec<_>>().join(",")
}

impl Ctx {
    /// `apiary pool apply [NAME] -f PATH... [--diff] [--prune]`.
    pub async fn apply_files(
        &self,
        name: Option<&str>,
        paths: &[PathBuf],
        diff: bool,
        prune: Option<&Map<String, Value>>,
    ) -> Result<()> {
        self.apply_pools(read(name, paths)?, diff, prune).await
    }

    /// Applies one pool's document (`pool import --apply`).
    pub async fn apply_document(&self, doc: Document) -> Result<()> {
        self.apply_pools(checked(None, vec![doc])?, false, None).await
    }

    /// Applies `files` (or, with `diff`, says what applying them would do); with `prune`, deletes the pools they
    /// no longer name.
    pub async fn apply_pools(
        &self,
        files: Vec<PoolFile>,
        diff: bool,
        prune: Option<&Map<String, Value>>,
    ) -> Result<()> {
        if let Some(labels) = prune {
            carried(&files, labels)?;
        }
        // The pools as they are, and what each file would do to its own: every file is checked against its pool
        // before anything is written.
        let mut planned = Vec::with_capacity(files.len());
        let mut refused = Vec::new();
        for file in &files {
            let (status, answer) = self.api.send("GET", &format!("/pools/{}", file.name), None).await?;
            let current: Option<PoolSpec> = match status {
                404 => None,
                s if s >= 400 => return Err(Failure::from(ApiError::from_answer(s, &answer)).context(&file.name)),
                _ => Some(serde_json::from_value(answer["spec"].clone()).map_err(|e| {
                    Failure::other(format!("pool {}: an unexpected spec from the API: {e}", file.name))
                })?),
            };
            if let Some(Err(errors)) = current.as_ref().map(|c| validate_update(c, &file.parsed)) {
                refused
                    .extend(errors.iter().map(|e| file.doc.place(&format!("{}{}", file.prefix, e.field), &e.message)));
                continue;
            }
            planned.push(self.outcome(file, current.as_ref()).await?);
        }
        refuse_if_any(refused)?;
        let pruned = match prune {
            Some(labels) => self.unnamed(&files, labels).await?,
            None => vec![],
        };

        let mut reports = Vec::with_capacity(files.len() + pruned.len());
        for (file, outcome) in files.iter().zip(&planned) {
            let mut report = report(&file.name, outcome, diff);
            if !diff {
                report["rev"] = self.put(file).await?;
            }
            reports.push(report);
        }
        for pool in &pruned {
            if !diff {
                self.api.call("DELETE", &format!("/pools/{pool}"), None).await?;
            }
            let verb = if diff { "would be deleted" } else { "deleted" };
            reports.push(json!({"name": pool, "outcome": "deleted", "said": verb, "fields": [], "replaced": []}));
        }
        let changes = !pruned.is_empty() || planned.iter().any(|o| *o != Outcome::Unchanged);
        let answer = json!({"diff": diff, "changes": changes, "pools": reports});
        self.show(&answer, || Ok(crate::render::apply_report(&reports)))?;
        if diff && changes {
            return Err(Failure::new(Exit::Changes, ""));
        }
        Ok(())
    }

    /// What `file` does to its pool, `current` (none: a new pool).
    async fn outcome(&self, file: &PoolFile, current: Option<&PoolSpec>) -> Result<Outcome> {
        let Some(current) = current else { return Ok(Outcome::Created) };
        // Equal as the API compares them: the same spec writes nothing.
        if *current == file.parsed {
            return Ok(Outcome::Unchanged);
        }
        let fields = changed_fields(current, &file.parsed);
        // The clusters are read only for a change that may replace some.
        let may_replace = apiary_planner::pool_version(current) != apiary_planner::pool_version(&file.parsed)
            || current.inventory != file.parsed.inventory;
        let replaced = if may_replace {
            let (_, answer) = self.api.call("GET", &format!("/pools/{}/clusters", file.name), None).await?;
            let clusters: Vec<Cluster> = serde_json::from_value(answer["clusters"].clone())
                .map_err(|e| Failure::other(format!("pool {}: unexpected clusters from the API: {e}", file.name)))?;
            replaced(current, &file.parsed, &clusters)
        } else {
            vec![]
        };
        Ok(Outcome::Changed { fields, replaced })
    }

    /// The stack's pools carrying every label of `keep` that no file names.
    async fn unnamed(&self, files: &[PoolFile], keep: &Map<String, Value>) -> Result<Vec<String>> {
        let (_, answer) = self.api.call("GET", "/pools", None).await?;
        let pools = answer["pools"].as_array().cloned().unwrap_or_default();
        Ok(pools
            .iter()
            .filter(|p| keep.iter().all(|(k, v)| p["spec"]["labels"][k] == *v))
            .filter_map(|p| p["name"].as_str())
            .filter(|name| !files.iter().any(|f| f.name == *name))
            .map(str::to_owned)
            .collect())
    }

    /// Writes `file`'s pool; its revision after. A refusal names each field where it is in the file.
    async fn put(&self, file: &PoolFile) -> Result<Value> {
        let name = &file.name;
        let (status, answer) = self.api.send("PUT", &format!("/pools/{name}"), Some(&file.spec)).await?;
        if status < 400 {
            return Ok(answer["rev"].clone());
        }
        let e = ApiError::from_answer(status, &answer);
        let mut failure = Failure::from(e.clone());
        let placed: Vec<String> =
            e.fields.iter().map(|(f, m)| file.doc.place(&format!("{}{f}", file.prefix), m)).collect();
        match placed.as_slice() {
            [] => {}
            [one] => failure.message = one.clone(),
            many => {
                failure.message = format!("{}: the API refused {} fields", file.doc.path.display(), many.len());
                failure.details = many.to_vec();
            }
        }
        Err(failure.context(format!("pool {name}")))
    }
}

/// One pool's line of the report, as JSON.
fn report(name: &str, outcome: &Outcome, diff: bool) -> Value {
    let (kind, said) = match (outcome, diff) {
        (Outcome::Created, false) => ("created", "created"),
        (Outcome::Created, true) => ("created", "would be created"),
        (Outcome::Changed { .. }, false) => ("changed", "changed"),
        (Outcome::Changed { .. }, true) => ("changed", "would change"),
        (Outcome::Unchanged, _) => ("unchanged", "unchanged"),
    };
    let (fields, replaced) = match outcome {
        Outcome::Changed { fields, replaced } => (
            fields.iter().map(|f| json!({"field": f.field, "before": f.before, "after": f.after})).collect(),
            replaced.iter().map(|(id, why)| json!({"cluster": id, "reason": why})).collect(),
        ),
        _ => (vec![], vec![]),
    };
    json!({"name": name, "outcome": kind, "said": said, "fields": fields, "replaced": replaced})
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(name: &str, files: &[(&str, &str)]) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("apiary-apply-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("dir");
        for (file, text) in files {
            std::fs::write(dir.join(file), text).expect("file");
        }
        dir
    }

    const FAKE: &str = "size: 1\nplatform:\n  fake: {}\n";

    #[test]
    fn a_directory_gives_its_pool_files_in_name_order_each_named_by_its_file_or_its_name() {
        let d = dir(
            "names",
            &[
                ("b.yaml", FAKE),
                ("a.json", r#"{"size": 2, "platform": {"fake": {}}}"#),
                ("c.yml", &format!("name: gamma\nspec:\n  {}", FAKE.replace('\n', "\n  "))),
                ("notes.txt", "x"),
            ],
        );
        let files = read(None, std::slice::from_ref(&d)).expect("read");
        let names: Vec<&str> = files.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(names, ["a", "b", "gamma"]);
        assert_eq!(files[2].prefix, "spec.");
        // NAME names a single file's pool only.
        let one = read(Some("solo"), &[d.join("b.yaml")]).expect("one");
        assert_eq!(one[0].name, "solo");
        let why = read(Some("solo"), &[d]).err().expect("refused").message;
        assert!(why.contains("NAME names one pool, but -f gives 3 files"), "{why}");
        let empty = dir("empty", &[("notes.txt", "x")]);
        assert!(read(None, &[empty]).err().expect("refused").message.contains("no .json, .yaml or .yml file"));
    }

    #[test]
    fn every_refused_file_is_named_and_a_pool_named_twice_is_refused() {
        let d = dir(
            "refused",
            &[
                ("ok.yaml", FAKE),
                ("bad.yaml", "size: -1\nplatform:\n  fake: {}\n"),
                ("Bad_Name.yaml", FAKE),
                ("typo.yaml", "size: 1\nplatfrom:\n  fake: {}\n"),
            ],
        );
        let failure = read(None, &[d]).err().expect("refused");
        assert_eq!(failure.exit, Exit::Usage);
        assert_eq!(failure.message, "3 refusals; nothing was applied");
        let details = failure.details.join("\n");
        assert!(details.contains("Bad_Name.yaml: the pool's name \"Bad_Name\""), "{details}");
        assert!(details.contains("bad.yaml:1: size:"), "{details}");
        assert!(details.contains("typo.yaml"), "{details}");
        let twice =
            dir("twice", &[("a.yaml", FAKE), ("b.yaml", &format!("name: a\nspec:\n  {}", FAKE.replace('\n', "\n  ")))]);
        let why = read(None, &[twice]).err().expect("refused").message;
        assert!(why.ends_with("both name pool a"), "{why}");
    }
}
