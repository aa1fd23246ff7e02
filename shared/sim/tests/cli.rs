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

#[test]
fn every_compared_policy_can_be_named() {
    // The names `--policy` accepts are the ones the comparison runs: a policy added to one is added to the other.
    let dir = std::env::temp_dir().join(format!("apiary-sim-names-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let trace = dir.join("tiny.csv");
    std::fs::write(&trace, "# start: 2026-01-05T09:00:00Z\n# length: 2h\nclaim_at_seconds,hold_seconds\n60,900\n")
        .unwrap();
    let out = dir.join("out");
    let o = sim(&["--trace", trace.to_str().unwrap(), "--out", out.to_str().unwrap(), "--json"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let compared: Vec<String> = report
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["policy"].as_str().unwrap().split(" (").next().unwrap().to_string())
        .collect();
    let refused = sim(&["--policy", "none"]);
    let err = String::from_utf8_lossy(&refused.stderr);
    let first = err.lines().next().unwrap();
    let accepted: Vec<&str> = first.split("is not one of ").nth(1).unwrap().trim().split(", ").collect();
    assert_eq!(compared, accepted);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_bill_names_a_bad_option() {
    for (args, named) in [(&["bill", "--seed", "one"][..], "--seed"), (&["bill", "--pools"][..], "--pools")] {
        let o = sim(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        let first = err.lines().next().unwrap_or_default();
        assert!(first.starts_with("apiary-sim bill: ") && first.contains(named), "{err}");
        assert!(err.contains("usage:"), "{err}");
    }
}
