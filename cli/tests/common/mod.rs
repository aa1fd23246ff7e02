//! What the command line's tests against the local stack share: running the binary, files for it, a pool.

#![allow(dead_code)]

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::support::Stack;

/// What one run of the binary did.
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    pub fn ok(self, what: &str) -> Self {
        assert_eq!(self.code, 0, "{what}: exit {}\n{}\n{}", self.code, self.stdout, self.stderr);
        self
    }

    pub fn json(&self) -> Value {
        serde_json::from_str(&self.stdout).unwrap_or_else(|e| panic!("{e}: {}", self.stdout))
    }
}

/// Runs `apiary args…` against `stack`'s API as `who`.
pub async fn apiary(stack: &Stack, who: &str, args: &[&str]) -> Run {
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_apiary"));
    command.args(args).env("APIARY_API", &stack.base).env("APIARY_PRINCIPAL", who);
    for var in ["APIARY_STACK", "APIARY_AUTH"] {
        command.env_remove(var);
    }
    // The functions run on this test's runtime: the binary waits on a blocking thread beside them.
    let out = tokio::task::spawn_blocking(move || command.output()).await.expect("joined").expect("apiary runs");
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

pub fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("apiary-cli-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

pub fn write(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).expect("write");
    path.display().to_string()
}

pub const POOL: &str = "\
# Two clusters of two instances on the emulator's EC2, one kept Running.
size: 2
runningCount: 1
claimLifetime:
  default: 1h
platform:
  aws:
    region: us-east-1
    imageId: ami-0123456789abcdef0
    instanceType: t3.medium
    machineCount: 2
labels:
  team: ci
  cloud: aws
";
