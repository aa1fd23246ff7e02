//! Files the commands read (pool specs, Hive manifests): YAML or JSON, and the line each field is on, so that a
//! field the API refuses is shown against the file.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use serde::de::{Deserializer, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use serde_json::Value;
use serde_saphyr::Spanned;

use crate::error::{Failure, Result};

/// Largest file a command reads (a pool spec is bounded far below this by the API).
const MAX_FILE: u64 = 4 << 20;

/// A file read and parsed: its value, and where each of its fields is.
pub struct Document {
    /// The file's path as given (`-` for standard input).
    pub path: PathBuf,
    /// Its content.
    pub value: Value,
    shape: Option<Spanned<Node>>,
}

impl Document {
    /// Reads and parses `path` (`-`: standard input). JSON when the name ends in `.json` or the text starts with
    /// `{`, YAML otherwise.
    pub fn read(path: &Path) -> Result<Self> {
        let text = if path == Path::new("-") {
            let mut text = String::new();
            std::io::Read::read_to_string(&mut std::io::stdin().lock(), &mut text)
                .map_err(|e| Failure::usage(format!("reading standard input: {e}")))?;
            text
        } else {
            let meta =
                std::fs::metadata(path).map_err(|e| Failure::usage(format!("{}: {}", path.display(), io(&e))))?;
            if meta.len() > MAX_FILE {
                return Err(Failure::usage(format!("{}: larger than {MAX_FILE} bytes", path.display())));
            }
            std::fs::read_to_string(path).map_err(|e| Failure::usage(format!("{}: {}", path.display(), io(&e))))?
        };
        Self::parse(path, &text)
    }

    /// Parses `text`, read from `path`.
    pub fn parse(path: &Path, text: &str) -> Result<Self> {
        let json = path.extension().is_some_and(|e| e == "json") || text.trim_start().starts_with('{');
        let value: Value = if json {
            serde_json::from_str(text)
                .map_err(|e| Failure::usage(format!("{}: not valid JSON: {e}", path.display())))?
        } else {
            serde_saphyr::from_str(text)
                .map_err(|e| Failure::usage(format!("{}: not valid YAML: {}", path.display(), first_line(&e))))?
        };
        if !value.is_object() {
            return Err(Failure::usage(format!("{}: want a mapping of fields at the top", path.display())));
        }
        // JSON is YAML too: the same walk finds the lines of either (a JSON file YAML cannot read has no lines).
        let shape = serde_saphyr::from_str::<Spanned<Node>>(text).ok();
        Ok(Self { path: path.to_owned(), value, shape })
    }

    /// The line of the value at `field` (`platform.aws.machineCount`, `inventory.clusterDeployments[2].name`),
    /// or of the nearest enclosing value the file has (for a missing field, the mapping that misses it).
    pub fn line_of(&self, field: &str) -> Option<u32> {
        let mut node = self.shape.as_ref()?;
        let mut line = None;
        for step in steps(field) {
            let next = match (&node.value, step) {
                (Node::Map(fields), Step::Key(k)) => fields.get(k),
                (Node::Seq(items), Step::Index(i)) => items.get(i),
                _ => None,
            };
            match next {
                Some(n) => {
                    node = n;
                    line = u32::try_from(n.referenced.line()).ok();
                }
                None => break,
            }
        }
        line.filter(|l| *l > 0)
    }

    /// `field: message` placed in the file: `path:line: field: message`.
    pub fn place(&self, field: &str, message: &str) -> String {
        match self.line_of(field) {
            Some(line) => format!("{}:{line}: {field}: {message}", self.path.display()),
            None => format!("{}: {field}: {message}", self.path.display()),
        }
    }
}

fn io(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::NotFound => "no such file".into(),
        std::io::ErrorKind::PermissionDenied => "permission denied".into(),
        _ => e.to_string(),
    }
}

/// A parser's message without the snippet of the file it may quote after the first line.
fn first_line(e: &impl fmt::Display) -> String {
    e.to_string().lines().next().unwrap_or_default().to_owned()
}

enum Step<'a> {
    Key(&'a str),
    Index(usize),
}

/// `a.b[2].c` as keys and indices.
fn steps(field: &str) -> Vec<Step<'_>> {
    let mut out = vec![];
    for part in field.split('.') {
        let (key, mut rest) = part.split_once('[').map_or((part, ""), |(k, r)| (k, r));
        if !key.is_empty() {
            out.push(Step::Key(key));
        }
        while let Some((index, after)) = rest.split_once(']') {
            if let Ok(i) = index.parse() {
                out.push(Step::Index(i));
            }
            rest = after.strip_prefix('[').unwrap_or(after);
        }
    }
    out
}

/// A document's shape with the location of every value: mappings, sequences and the scalars at their leaves.
enum Node {
    Map(BTreeMap<String, Spanned<Node>>),
    Seq(Vec<Spanned<Node>>),
    Leaf,
}

impl<'de> Deserialize<'de> for Node {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        deserializer.deserialize_any(NodeVisitor)
    }
}

struct NodeVisitor;

macro_rules! leaves {
    ($($method:ident: $t:ty),*) => {
        $(fn $method<E: serde::de::Error>(self, _: $t) -> std::result::Result<Node, E> { Ok(Node::Leaf) })*
    };
}

impl<'de> Visitor<'de> for NodeVisitor {
    type Value = Node;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any YAML value")
    }

    leaves!(visit_bool: bool, visit_i64: i64, visit_u64: u64, visit_f64: f64, visit_str: &str, visit_bytes: &[u8]);

    fn visit_unit<E: serde::de::Error>(self) -> std::result::Result<Node, E> {
        Ok(Node::Leaf)
    }

    fn visit_none<E: serde::de::Error>(self) -> std::result::Result<Node, E> {
        Ok(Node::Leaf)
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> std::result::Result<Node, D::Error> {
        Node::deserialize(d)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> std::result::Result<Node, A::Error> {
        let mut items = vec![];
        while let Some(item) = seq.next_element::<Spanned<Node>>()? {
            items.push(item);
        }
        Ok(Node::Seq(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> std::result::Result<Node, A::Error> {
        let mut fields = BTreeMap::new();
        while let Some(key) = map.next_key::<KeyText>()? {
            let value = map.next_value::<Spanned<Node>>()?;
            fields.insert(key.0, value);
        }
        Ok(Node::Map(fields))
    }
}

/// A mapping's key as text, whatever scalar it is.
struct KeyText(String);

impl<'de> Deserialize<'de> for KeyText {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        let v = serde_json::Value::deserialize(deserializer)?;
        Ok(KeyText(match v {
            Value::String(s) => s,
            other => other.to_string(),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SPEC: &str = "\
size: 3
runningCount: 1
platform:
  aws:
    region: us-east-1
    machineCount: 0
inventory:
  clusterDeployments:
    - name: foo
    - name: bar
";

    fn doc(text: &str, name: &str) -> Document {
        Document::parse(Path::new(name), text).expect("parses")
    }

    #[test]
    fn a_field_is_found_on_its_line_in_yaml() {
        let d = doc(SPEC, "pool.yaml");
        assert_eq!(d.line_of("size"), Some(1));
        assert_eq!(d.line_of("platform.aws.machineCount"), Some(6));
        assert_eq!(d.line_of("inventory.clusterDeployments[1].name"), Some(10));
        assert_eq!(
            d.place("platform.aws.machineCount", "at least 1"),
            "pool.yaml:6: platform.aws.machineCount: at least 1"
        );
    }

    #[test]
    fn a_missing_field_points_at_the_mapping_that_misses_it() {
        let d = doc(SPEC, "pool.yaml");
        assert_eq!(d.line_of("platform.aws.imageId"), d.line_of("platform.aws"));
        assert_eq!(d.line_of("nothing"), None);
        assert_eq!(d.place("nothing", "unknown field"), "pool.yaml: nothing: unknown field");
    }

    #[test]
    fn json_files_have_lines_too() {
        let d = doc("{\n  \"size\": 3,\n  \"platform\": {\n    \"fake\": {}\n  }\n}\n", "pool.json");
        assert_eq!(d.value["size"], 3);
        assert_eq!(d.line_of("platform.fake"), Some(4));
    }

    #[test]
    fn bad_files_are_refused_with_a_one_line_reason() {
        for (text, name, want) in [
            ("size: [1,", "a.yaml", "a.yaml: not valid YAML"),
            ("{\"size\": ", "a.json", "a.json: not valid JSON"),
            ("- 1\n- 2\n", "a.yaml", "want a mapping"),
        ] {
            let e = Document::parse(Path::new(name), text).err().expect("refused");
            assert!(e.message.contains(want), "{text}: {}", e.message);
            assert!(!e.message.contains('\n'), "{}", e.message);
        }
        let e = Document::read(Path::new("/nonexistent/pool.yaml")).err().expect("refused");
        assert_eq!(e.message, "/nonexistent/pool.yaml: no such file");
    }
}
