//! `apiary-local`'s command line: bad arguments are refused by name before anything starts.

use std::process::Command;

fn run(args: &[&str]) -> (i32, String) {
    let out =
        Command::new(env!("CARGO_BIN_EXE_apiary-local")).args(args).env_remove("APIARY_TABLE").output().expect("run");
    (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn help_and_bad_arguments_say_what_is_wrong() {
    let (code, err) = run(&["--help"]);
    assert_eq!(code, 2);
    assert!(err.contains("usage: apiary-local"), "{err}");
    let (code, err) = run(&["--sweep-every", "often"]);
    assert_ne!(code, 0);
    assert!(err.contains("--sweep-every") && err.contains("often"), "{err}");
    let (code, err) = run(&["--listen", "nowhere"]);
    assert_ne!(code, 0);
    assert!(err.contains("--listen"), "{err}");
    let (code, err) = run(&["--address-file"]);
    assert_eq!(code, 2);
    assert!(err.contains("--address-file FILE"), "{err}");
    let (code, err) = run(&["--colour"]);
    assert_ne!(code, 0);
    assert!(err.contains("--colour"), "{err}");
    // Without the stack's settings it names the missing one instead of starting.
    let (code, err) = run(&["--listen", "127.0.0.1:0"]);
    assert_ne!(code, 0);
    assert!(err.contains("APIARY_TABLE"), "{err}");
}
