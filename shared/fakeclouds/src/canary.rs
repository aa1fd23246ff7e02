//! Canaries: every secret the fakes, the tests and `make run` make is unique and says what it is
//! (`apiary-canary-<kind>-<16 hex digits>`), so that a scan of what was logged, answered, posted and written to
//! a trail finds any secret that leaked and names it (`tests/canary_scan.py`).
//!
//! Where `APIARY_CANARY_DIR` names a directory (as `make test` sets it), [`secret`] also writes each kind made
//! there (`minted`, never the secret), so the scan can show that the secrets it looks for were made at all, and
//! [`keep`] writes what a test captured (`<what>/<name>`: `errors`, `notifications`, `trail`, `jobs`, `logs`) for
//! the scan to read. Without it they keep nothing.

use std::io::Write;
use std::path::PathBuf;

use base64::Engine;

/// What every canary starts with.
pub const MARK: &str = "apiary-canary";

/// The environment variable naming where canaries and captures are written.
pub const DIR: &str = "APIARY_CANARY_DIR";

/// A new secret of `kind` (lowercase letters and dashes: `kubeadmin-password`, `pull-secret`), unique and
/// recognisable: `apiary-canary-<kind>-<16 hex digits>`.
pub fn secret(kind: &str) -> String {
    let mut raw = [0u8; 8];
    aws_lc_rs::rand::fill(&mut raw).unwrap_or_default();
    let hex: String = raw.iter().map(|b| format!("{b:02x}")).collect();
    append("minted", &format!("{kind}\n"));
    format!("{MARK}-{kind}-{hex}")
}

/// A new signing key of `kind`, `whsec_<base64>` as a pool's secret holds one, whose bytes are a [`secret`]: 38
/// bytes, more than the 24 the Standard Webhooks specification asks of a key.
pub fn signing_key(kind: &str) -> String {
    format!("whsec_{}", base64::engine::general_purpose::STANDARD.encode(secret(kind)))
}

/// Where canaries and captures are written, when `APIARY_CANARY_DIR` names a directory.
pub fn dir() -> Option<PathBuf> {
    std::env::var_os(DIR).filter(|d| !d.is_empty()).map(PathBuf::from)
}

/// Keeps `text`, captured as `what` (`errors`, `notifications`, `trail`, `jobs`), in `<dir>/<what>/<name>` (one
/// file a name, appended to) for the scan; nothing without a directory.
pub fn keep(what: &str, name: &str, text: &str) {
    let name: String = name.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' { c } else { '_' }).collect();
    append(&format!("{what}/{name}"), &format!("{text}\n"));
}

/// Keeps each file of `folder` (a reference installer's `<root>/jobs`: one output a job) as `what`, named
/// `<name>-<file>`; nothing without a directory.
pub fn keep_files(what: &str, name: &str, folder: &std::path::Path) {
    if dir().is_none() {
        return;
    }
    for entry in std::fs::read_dir(folder).into_iter().flatten().flatten() {
        let file = entry.file_name().to_string_lossy().into_owned();
        if let Ok(text) = std::fs::read_to_string(entry.path()) {
            keep(what, &format!("{name}-{file}"), &text);
        }
    }
}

/// The file a process keeps its log lines in, `<dir>/logs/<process>-<pid>.jsonl`, its folder made.
pub fn log_file(process: &str) -> Option<PathBuf> {
    let logs = dir()?.join("logs");
    std::fs::create_dir_all(&logs).ok()?;
    Some(logs.join(format!("{process}-{}.jsonl", std::process::id())))
}

fn append(path: &str, text: &str) {
    let Some(dir) = dir() else { return };
    let path = dir.join(path);
    if let Some(parent) = path.parent() {
        let _ = std::fs::create_dir_all(parent);
    }
    // A capture that cannot be written leaves the scan without it, and the scan says which captures it lacks.
    if let Ok(mut f) = std::fs::OpenOptions::new().create(true).append(true).open(&path) {
        let _ = f.write_all(text.as_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_canary_names_its_kind_and_none_repeats() {
        let (a, b) = (secret("pull-secret"), secret("pull-secret"));
        assert!(a.starts_with("apiary-canary-pull-secret-") && a.len() == "apiary-canary-pull-secret-".len() + 16);
        assert_ne!(a, b);
        let key = signing_key("signing-key");
        let raw = base64::engine::general_purpose::STANDARD.decode(key.trim_start_matches("whsec_")).expect("base64");
        assert!(String::from_utf8(raw).expect("text").starts_with("apiary-canary-signing-key-"), "{key}");
    }
}
