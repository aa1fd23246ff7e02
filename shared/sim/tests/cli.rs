//! The `apiary-sim` command line: `--policy` narrows the comparison and names what it accepts.
#![allow(clippy::unwrap_used)]

use std::process::Command;

fn sim(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_apiary-sim")).args(args).output().expect("apiary-sim runs")
}

#[test]
fn policy_compares_only_the_named_policies() {
    let dir = std::env::temp_dir().join(format!("apiary-sim-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let trace = dir.join("tiny.csv");
    std::fs::write(
        &trace,
        "# start: 2026-01-05T09:00:00Z\n# length: 2h\nclaim_at_seconds,hold_seconds\n60,900\n600,1800\n",
    )
    .unwrap();
    let out = dir.join("out");
    let o = sim(&[
        "--trace",
        trace.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--policy",
        "static-formula",
        "--policy",
        "oracle",
        "--json",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let names: Vec<&str> = report.as_array().unwrap().iter().map(|p| p["policy"].as_str().unwrap()).collect();
    assert_eq!(names.len(), 2, "{names:?}");
    assert!(names[0].starts_with("static-formula ("), "{names:?}");
    assert_eq!(names[1], "oracle");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn an_unknown_policy_is_named_with_the_ones_there_are() {
    let o = sim(&["--policy", "forcast"]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("\"forcast\"") && err.contains("keep-fresh"), "{err}");
}
