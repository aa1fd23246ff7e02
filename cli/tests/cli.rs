//! The `apiary` binary against the local stack (the emulator `make test` starts, the functions in this process):
//! a pool applied from YAML, a Hive ClusterPool imported, a claim waited on until Ready with `--output env`,
//! released, and the exit codes a CI script branches on.

mod common;
#[path = "../../tests/support/mod.rs"]
mod support;

use std::time::Duration;

use common::{apiary, temp_dir, write, POOL};
use support::{ADMIN, ALICE, BOB};

/// The tests that need the emulator, under one name `make unit` skips (`--skip against_stack::`).
mod against_stack {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_ci_job_applies_a_pool_claims_until_ready_exports_the_cluster_and_releases_it() {
        let s = support::stack().await;
        let dir = temp_dir("ci");
        // Issue 59: the pool tells a receiver of its claims, signed with a key kept in Secrets Manager.
        let (receiver, key) = s.notify_receiver(&["ci"]).await;
        let notify = format!("notify:\n  - url: {}\n    secret: {key}\n", receiver.url());
        let file = write(&dir, "pool.yaml", &format!("{POOL}{notify}"));

        let applied = apiary(&s, ADMIN, &["pool", "apply", "ci", "-f", &file]).await.ok("apply");
        assert_eq!(applied.stdout, "pool ci created (rev 0)\n");
        // Not on a terminal, which local API is used is not said: a script's standard error holds only failures.
        assert_eq!(applied.stderr, "", "no notice");
        let me = apiary(&s, ADMIN, &["whoami", "-o", "json"]).await.ok("whoami").json();
        assert_eq!((me["principal"].as_str(), me["stackAdmin"].as_bool()), (Some(ADMIN), Some(true)));
        assert!(me["administer"].as_array().is_some_and(|p| p.iter().any(|n| n == "ci")), "{me}");
        // The stack runs this command line's release, and says so.
        let version = apiary(&s, ADMIN, &["version", "-o", "json"]).await.ok("version").json();
        assert_eq!(version["stack"].as_str(), Some(env!("CARGO_PKG_VERSION")), "{version}");
        assert_eq!(version["compatibility"].as_str(), Some("supported: the same release"), "{version}");
        let got = apiary(&s, ADMIN, &["pool", "get", "ci", "-o", "json"]).await.ok("get").json();
        assert_eq!(
            (got["spec"]["size"].as_i64(), got["spec"]["platform"]["aws"]["machineCount"].as_i64()),
            (Some(2), Some(2))
        );
        // Applying the same file again changes nothing; `pool get -o yaml` output applies as it is.
        apiary(&s, ADMIN, &["pool", "apply", "ci", "-f", &file]).await.ok("apply again");
        let yaml = apiary(&s, ADMIN, &["pool", "get", "ci", "-o", "yaml"]).await.ok("get yaml").stdout;
        let again = apiary(&s, ADMIN, &["pool", "apply", "-f", &write(&dir, "ci.yaml", &yaml)]).await.ok("round trip");
        assert!(again.stdout.starts_with("pool ci unchanged"), "{}", again.stdout);
        s.converged("ci", 2, 1).await;

        // The watch view, not on a terminal: a frame with the pool's counts and clusters, then one per change.
        let mut watch = std::process::Command::new(env!("CARGO_BIN_EXE_apiary"));
        watch
            .args(["pool", "watch", "ci", "--interval", "1s"])
            .env("APIARY_API", &s.base)
            .env("APIARY_PRINCIPAL", ADMIN)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        let mut child = watch.spawn().expect("watch runs");
        tokio::time::sleep(Duration::from_secs(3)).await;
        child.kill().expect("stopped");
        let frames = String::from_utf8_lossy(&child.wait_with_output().expect("output").stdout).into_owned();
        assert!(frames.starts_with("--- "), "{frames}");
        assert!(frames.contains("pool ci  size 2 running 1 | ready 1 standby 1"), "{frames}");
        assert!(frames.contains("Hibernating") && frames.contains("NAME"), "{frames}");

        // The CI job: claim, wait until Ready, take the cluster's settings into its shell.
        let claimed = apiary(&s, ALICE, &["claim", "ci", "build-1", "--lifetime", "30m", "--wait", "2m", "-o", "env"])
            .await
            .ok("claim");
        let env = shell_env(&claimed.stdout);
        assert_eq!(env.get("APIARY_CLAIM_PHASE").map(String::as_str), Some("Ready"), "{}", claimed.stdout);
        let cluster = env.get("APIARY_CLUSTER_ID").expect("cluster id").clone();
        assert!(env.get("APIARY_INFRA_ID").is_some_and(|i| i.starts_with(&cluster)), "{}", claimed.stdout);
        let ips: Vec<&str> = env.get("APIARY_PRIVATE_IPS").map(|i| i.split(' ').collect()).unwrap_or_default();
        assert_eq!(ips.len(), 2, "two machines with their addresses: {}", claimed.stdout);
        assert!(claimed.stderr.contains("Ready in"), "{}", claimed.stderr);

        let table = apiary(&s, ADMIN, &["pool", "clusters", "ci"]).await.ok("clusters").stdout;
        let row = table.lines().find(|l| l.contains(&cluster)).unwrap_or_else(|| panic!("{table}"));
        assert!(row.contains("Running") && row.contains("build-1"), "{table}");
        let mine = apiary(&s, ALICE, &["claim", "list", "ci", "-o", "json"]).await.ok("list").json();
        assert_eq!(mine["claims"].as_array().map(Vec::len), Some(1));

        // Exit codes: another principal may not see the claim (3), nor may a non-admin change the pool (3); an unknown
        // claim is 4; a claim name that exists for another principal is a conflict (5).
        let forbidden = apiary(&s, BOB, &["claim", "get", "ci", "build-1"]).await;
        assert_eq!(forbidden.code, 3, "{}", forbidden.stderr);
        assert!(forbidden.stderr.contains("belongs to another principal"), "{}", forbidden.stderr);
        assert_eq!(apiary(&s, ALICE, &["pool", "apply", "ci", "-f", &file]).await.code, 3);
        assert_eq!(apiary(&s, ALICE, &["claim", "get", "ci", "nope"]).await.code, 4);
        assert_eq!(apiary(&s, BOB, &["claim", "ci", "build-1"]).await.code, 5);

        // Issue 59: the owner extends the claim and shares it; the one it is shared with releases it.
        let extended = apiary(&s, ALICE, &["claim", "extend", "ci", "build-1", "1h"]).await.ok("extend").stdout;
        assert!(extended.starts_with("claim ci/build-1: lifetime 1h; it ends at "), "{extended}");
        assert_eq!(apiary(&s, BOB, &["claim", "share", "ci", "build-1", "--subject", BOB]).await.code, 3);
        apiary(&s, ALICE, &["claim", "share", "ci", "build-1", "--subject", BOB]).await.ok("share");
        let shown = apiary(&s, BOB, &["claim", "get", "ci", "build-1"]).await.ok("get as a subject").stdout;
        assert!(shown.contains(&format!("shared with  {BOB}")), "{shown}");
        apiary(&s, BOB, &["claim", "release", "ci", "build-1"]).await.ok("release by a subject");
        s.until("the released cluster is gone", Duration::from_secs(60), || async {
            let clusters = s.clusters("ci").await;
            (!clusters.iter().any(|c| c["id"] == cluster.as_str())).then_some(())
        })
        .await;

        // Claimed by labels, a subject named: the pool that carries them serves it; the owner extends it, the
        // subject releases it by the pool the answer named.
        let by_labels = ["claim", "--selector", "team=ci,cloud=aws", "build-2", "--subject", BOB, "--wait", "2m"];
        let made = apiary(&s, ALICE, &[&by_labels[..], &["-o", "json"]].concat()).await.ok("claim by labels").json();
        assert_eq!((made["pool"].as_str(), made["phase"].as_str()), (Some("ci"), Some("Ready")), "{made}");
        assert_eq!(made["selector"]["matchLabels"]["team"].as_str(), Some("ci"), "{made}");
        let shown = apiary(&s, BOB, &["claim", "get", "ci", "build-2"]).await.ok("get by labels").stdout;
        assert!(shown.contains("selector     cloud=aws,team=ci"), "{shown}");
        apiary(&s, ALICE, &["claim", "extend", "ci", "build-2", "2h"]).await.ok("extend a claim by labels");
        apiary(&s, BOB, &["claim", "release", "ci", "build-2"]).await.ok("a subject releases a claim by labels");
        let none = apiary(&s, ALICE, &["claim", "--selector", "team=nobody", "build-3"]).await;
        assert_eq!(none.code, 2, "no pool carries the labels: {}", none.stderr);
        assert!(none.stderr.contains("no pool carries team=nobody"), "{}", none.stderr);
        assert_eq!(apiary(&s, ALICE, &["claim", "--selector", "team=ci", "ci", "build-3"]).await.code, 2);

        // The receiver got each claim's assignment and its release, signed, with its owner and subjects, once each.
        let heard = |kind: &'static str, claim: &'static str| {
            let receiver = receiver.clone();
            move || {
                let found = receiver
                    .received()
                    .into_iter()
                    .find(|r| r.body["type"] == kind && r.body["data"]["claim"] == claim);
                std::future::ready(found)
            }
        };
        for claim in ["build-1", "build-2"] {
            let assigned = s.until("claim.assigned", Duration::from_secs(30), heard("claim.assigned", claim)).await;
            assert_eq!(assigned.body["data"]["owner"].as_str(), Some(ALICE), "{:?}", assigned.body);
            assert!(assigned.body["data"]["cluster"].is_string(), "{:?}", assigned.body);
            let released = s.until("claim.released", Duration::from_secs(30), heard("claim.released", claim)).await;
            assert_eq!(released.body["data"]["subjects"][0].as_str(), Some(BOB), "{:?}", released.body);
            assert!(released.body["data"]["reason"].is_string(), "{:?}", released.body);
        }
        assert!(receiver.refused().is_empty(), "every signature verified: {:?}", receiver.refused());

        // The pool's trail tells the claim's story and the cluster's end, newest first; its admins read it.
        let trail =
            apiary(&s, ADMIN, &["pool", "events", "ci", "--cluster", &cluster, "-o", "json"]).await.ok("events");
        let kinds: Vec<String> =
            trail.json()["events"].as_array().expect("events").iter().map(|e| e["type"].to_string()).collect();
        let at = |kind: &str| {
            kinds.iter().position(|k| k == &format!("\"{kind}\"")).unwrap_or_else(|| panic!("{kind}: {kinds:?}"))
        };
        assert!(at("ClusterRemoved") < at("ClusterDeleting"), "newest first: {kinds:?}");
        assert!(at("ClusterDeleting") < at("ClaimAssigned") && at("ClaimAssigned") < at("ClusterCreated"), "{kinds:?}");
        let table = apiary(&s, ADMIN, &["pool", "events", "ci", "--claim", "build-1"]).await.ok("events table").stdout;
        assert!(table.starts_with("AGE") && table.contains("ClaimCreated") && table.contains(ALICE), "{table}");
        assert!(table.contains("ClaimReleased") && table.contains("released by its claimant"), "{table}");
        assert!(
            table.contains("ClaimChanged") && table.contains(BOB),
            "the extension, the sharing, its release: {table}"
        );
        assert_eq!(apiary(&s, ALICE, &["pool", "events", "ci"]).await.code, 3, "a claimant does not read the trail");
        s.stop().await;
    }

    /// Issue 76 (and 73's bump of many pools in one command): a team's pools kept as files in a directory. `--diff`
    /// says what each file would change and which clusters the change replaces, as the planner decides it, and
    /// exits 7, or 0 when nothing would change; `--prune` deletes the team's pools no file names and never another
    /// team's; a refused file applies nothing.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_teams_pools_are_kept_as_files_diffed_applied_and_pruned() {
        let s = support::stack().await;
        let dir = temp_dir("as-code");
        let team = |labels: &str| POOL.replace("  team: ci\n", labels);
        let pools = dir.join("pools");
        std::fs::create_dir_all(&pools).expect("pools/");
        let pools = pools.display().to_string();
        write(std::path::Path::new(&pools), "web.yaml", &team("  team: web\n"));
        write(
            std::path::Path::new(&pools),
            "api.json",
            &serde_json::to_string(&serde_json::json!({
                "size": 1, "platform": {"fake": {}}, "labels": {"team": "web"},
            }))
            .expect("json"),
        );
        let other = write(&dir, "theirs.yaml", &team("  team: data\n"));
        apiary(&s, ADMIN, &["pool", "apply", "-f", &other]).await.ok("another team's pool");

        let diff = apiary(&s, ADMIN, &["pool", "apply", "-f", &pools, "--diff"]).await;
        assert_eq!(diff.code, 7, "{}{}", diff.stdout, diff.stderr);
        assert_eq!(diff.stdout, "pool api would be created\npool web would be created\n");
        assert_eq!(apiary(&s, ADMIN, &["pool", "get", "web"]).await.code, 4, "a diff changes nothing");
        let applied = apiary(&s, ADMIN, &["pool", "apply", "-f", &pools]).await.ok("apply");
        assert_eq!(applied.stdout, "pool api created (rev 0)\npool web created (rev 0)\n");
        assert_eq!(
            apiary(&s, ADMIN, &["pool", "apply", "-f", &pools, "--diff"]).await.ok("no change").stdout,
            "pool api unchanged\npool web unchanged\n"
        );
        s.converged("web", 2, 1).await;

        // A change of the machines' type is a new poolVersion: both unclaimed clusters are to be replaced. A
        // change of size is not.
        let web = std::path::Path::new(&pools).join("web.yaml");
        std::fs::write(&web, team("  team: web\n").replace("t3.medium", "t3.large").replace("size: 2", "size: 3"))
            .expect("edited");
        let diff = apiary(&s, ADMIN, &["pool", "apply", "-f", &pools, "--diff", "-o", "json"]).await;
        assert_eq!(diff.code, 7, "{}", diff.stderr);
        let said = diff.json();
        let web_said = &said["pools"][1];
        assert_eq!(web_said["outcome"], "changed", "{said}");
        let fields: Vec<&str> =
            web_said["fields"].as_array().expect("fields").iter().filter_map(|f| f["field"].as_str()).collect();
        assert_eq!(fields, ["platform.aws.instanceType", "size"], "{said}");
        let replaced = web_said["replaced"].as_array().expect("replaced");
        assert_eq!(replaced.len(), 2, "{said}");
        assert!(replaced.iter().all(|r| r["reason"] == "Stale"), "{said}");
        let table = apiary(&s, ADMIN, &["pool", "apply", "-f", &pools, "--diff"]).await;
        assert!(
            table.stdout.contains("    platform.aws.instanceType: \"t3.medium\" -> \"t3.large\"\n"),
            "{}",
            table.stdout
        );
        assert!(table.stdout.contains("    replaces 2 unclaimed clusters, one at a time: "), "{}", table.stdout);

        // A refused file: every refusal named at its line, nothing applied (web keeps its type).
        let bad =
            write(std::path::Path::new(&pools), "bad.yaml", &team("  team: web\n").replace("size: 2", "size: -1"));
        let run = apiary(&s, ADMIN, &["pool", "apply", "-f", &pools]).await;
        assert_eq!(run.code, 2, "{}", run.stderr);
        assert!(
            run.stderr.contains("bad.yaml:2: size:") && run.stderr.contains("nothing was applied"),
            "{}",
            run.stderr
        );
        let got = apiary(&s, ADMIN, &["pool", "get", "web", "-o", "json"]).await.ok("get").json();
        assert_eq!(got["spec"]["platform"]["aws"]["instanceType"], "t3.medium");
        std::fs::remove_file(bad).expect("removed");

        // api's file goes: --prune deletes api, the one pool of the team's label no file names, never data's.
        std::fs::remove_file(std::path::Path::new(&pools).join("api.json")).expect("removed");
        let pruned = apiary(&s, ADMIN, &["pool", "apply", "-f", &pools, "--prune", "team=web"]).await.ok("prune");
        assert_eq!(pruned.stdout.lines().last(), Some("pool api deleted"), "{}", pruned.stdout);
        assert!(pruned.stdout.starts_with("pool web changed (rev "), "{}", pruned.stdout);
        assert_eq!(
            apiary(&s, ADMIN, &["pool", "get", "theirs", "-o", "json"]).await.ok("kept").json()["name"],
            "theirs"
        );
        // Files that do not carry the labels cannot prune by them: nothing is applied or deleted.
        let run = apiary(&s, ADMIN, &["pool", "apply", "-f", &pools, "-f", &other, "--prune", "team=web"]).await;
        assert_eq!(run.code, 2, "{}", run.stderr);
        assert!(
            run.stderr.contains("theirs.yaml: pool theirs does not carry the labels --prune keeps to (team=web)"),
            "{}",
            run.stderr
        );
        s.stop().await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn bad_files_and_waits_that_time_out_exit_with_their_own_codes() {
        let s = support::stack().await;
        let dir = temp_dir("bad");

        // A spec the API refuses: each field shown at its line in the file, exit 2.
        let bad = POOL.replace("size: 2", "size: -1").replace("machineCount: 2", "machineCount: 0");
        let run = apiary(&s, ADMIN, &["pool", "apply", "bad", "-f", &write(&dir, "bad.yaml", &bad)]).await;
        assert_eq!(run.code, 2, "{}", run.stderr);
        assert!(run.stderr.contains("bad.yaml:2: size:"), "{}", run.stderr);
        assert!(run.stderr.contains("bad.yaml:11: platform.aws.machineCount:"), "{}", run.stderr);
        assert!(!run.stderr.contains("panicked"), "{}", run.stderr);
        // A file that is not YAML, and one that is missing: exit 2 before any request.
        let run = apiary(&s, ADMIN, &["pool", "apply", "bad", "-f", &write(&dir, "garbled.yaml", "size: [2,\n")]).await;
        assert_eq!(run.code, 2, "{}", run.stderr);
        assert!(run.stderr.contains("garbled.yaml: not valid YAML"), "{}", run.stderr);
        assert_eq!(apiary(&s, ADMIN, &["pool", "apply", "bad", "-f", "/nonexistent.yaml"]).await.code, 2);
        assert_eq!(apiary(&s, ADMIN, &["pool", "get", "bad"]).await.code, 4, "nothing was created");

        // A pool that can never serve a claim: the wait times out with exit 6 and leaves the claim in place ...
        let empty = POOL.replace("size: 2", "size: 0").replace("runningCount: 1", "runningCount: 0\nmaxSize: 0");
        apiary(&s, ADMIN, &["pool", "apply", "empty", "-f", &write(&dir, "empty.yaml", &empty)]).await.ok("apply");
        let run = apiary(&s, ALICE, &["claim", "empty", "job-1", "--wait", "3s"]).await;
        assert_eq!(run.code, 6, "{}", run.stderr);
        assert!(run.stderr.contains("is not Ready after 3s (phase Pending)"), "{}", run.stderr);
        let kept = apiary(&s, ALICE, &["claim", "get", "empty", "job-1", "-o", "json"]).await.ok("kept").json();
        assert_eq!(kept["phase"], "Pending");
        // ... unless asked to release it.
        let run = apiary(&s, ALICE, &["claim", "empty", "job-2", "--wait", "2s", "--release-on-timeout"]).await;
        assert_eq!(run.code, 6, "{}", run.stderr);
        assert!(run.stderr.contains("released (--release-on-timeout)"), "{}", run.stderr);
        s.until("the timed-out claim is gone", Duration::from_secs(30), || async {
            let run = apiary(&s, ALICE, &["claim", "get", "empty", "job-2", "-o", "json"]).await;
            (run.code == 4 || run.json()["phase"] == "Releasing").then_some(())
        })
        .await;
        s.stop().await;
    }

    const HIVE: &str = include_str!("golden/clusterpool.yaml");

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_hive_clusterpool_is_imported_with_what_does_not_map_named_then_applied_and_deleted() {
        let s = support::stack().await;
        let dir = temp_dir("hive");
        let manifest = write(
            &dir,
            "clusterpool.yaml",
            &HIVE.replace("size: 4", "size: 1").replace("runningCount: 2", "runningCount: 1"),
        );

        // Printed: the pool as YAML on standard output, what was left behind and what is missing on standard error.
        let printed = apiary(&s, ADMIN, &["pool", "import", &manifest]).await.ok("import");
        assert!(printed.stdout.starts_with("name: ci-aws-414\nspec:\n"), "{}", printed.stdout);
        for dropped in ["spec.imageSetRef (openshift-v4.14.12)", "spec.pullSecretRef", "ClusterDeploymentCustomization"]
        {
            assert!(printed.stderr.contains(dropped), "{dropped}: {}", printed.stderr);
        }
        assert!(printed.stderr.contains("platform.aws.imageId"), "{}", printed.stderr);
        // Applying it as it is would fail: refused before any request, exit 2.
        let run = apiary(&s, ADMIN, &["pool", "import", &manifest, "--apply"]).await;
        assert_eq!(run.code, 2, "{}", run.stderr);
        assert_eq!(apiary(&s, ADMIN, &["pool", "get", "ci-aws-414"]).await.code, 4);

        // A base spec says what Hive cannot: the machine image and type.
        let base = write(
            &dir,
            "base.yaml",
            "platform:\n  aws:\n    imageId: ami-0123456789abcdef0\n    instanceType: t3.medium\n    machineCount: 2\n",
        );
        let applied = apiary(&s, ADMIN, &["pool", "import", &manifest, "--into", &base, "--apply"]).await.ok("apply");
        assert!(applied.stdout.contains("pool ci-aws-414 created"), "{}", applied.stdout);
        let pool = apiary(&s, ADMIN, &["pool", "get", "ci-aws-414", "-o", "json"]).await.ok("get").json();
        let spec = &pool["spec"];
        assert_eq!(spec["maxSize"], 10);
        assert_eq!(spec["maxConcurrent"], 3);
        assert_eq!(spec["hibernateAfter"], "2h");
        assert_eq!(spec["claimLifetime"]["maximum"], "12h");
        assert_eq!(spec["powerstateTransitionToRunningTimeout"], "15m", "from hibernationConfig.resumeTimeout");
        assert_eq!(spec["labels"]["team"], "platform");
        assert_eq!(spec["platform"]["aws"]["tags"]["owner"], "platform-team");
        s.converged("ci-aws-414", 1, 1).await;

        // Deleted, waiting until it is gone.
        let deleted = apiary(&s, ADMIN, &["pool", "delete", "ci-aws-414", "--wait", "2m"]).await.ok("delete");
        assert_eq!(deleted.stdout, "pool ci-aws-414 deleted\n");
        assert_eq!(apiary(&s, ADMIN, &["pool", "get", "ci-aws-414"]).await.code, 4);
        s.stop().await;
    }

    /// `apiary stack check` asks IAM's policy simulator (the emulator answers it with the policy evaluation its
    /// enforcement uses) about every call of infra/function-calls.json, on the stack's own resources: all allowed on
    /// the stack as deployed; a role that lost a grant is named with the call it lacks, and the command fails.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_stack_check_asks_iam_for_every_call_and_names_the_one_a_role_lacks() {
        let mut s = support::stack().await;
        async fn check(s: &support::Stack) -> common::Run {
            apiary(s, ADMIN, &["-o", "json", "stack", "check", &s.name]).await
        }
        // The sweep records its first full pass within a few seconds of the stack's start.
        let mut run = check(&s).await;
        for _ in 0..20 {
            if run.code == 0 {
                break;
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
            run = check(&s).await;
        }
        let report = run.ok("stack check").json();
        assert_eq!(report["problems"], 0, "{report}");
        let findings = report["findings"].as_array().expect("findings");
        let said = |what: &str| findings.iter().find(|f| f["what"].as_str().is_some_and(|w| w.starts_with(what)));
        let reconcile_table = said("reconcile: dynamodb:ConditionCheckItem").expect("the reconcile's table calls");
        assert!(reconcile_table["what"].as_str().expect("what").ends_with("on table"), "{reconcile_table}");
        assert_eq!(said("API /version").expect("the API")["ok"], true);
        assert_eq!(said("queue power dead letters").expect("the power queue's dead letters")["ok"], true);
        let listed: serde_json::Value = serde_json::from_str(apiary_cli::check::CALLS).expect("the list");
        let asked = findings.iter().filter(|f| f["what"].as_str().is_some_and(|w| w.contains(": "))).count();
        let entries: usize = ["claim-api", "reconcile", "power", "timeouts"]
            .iter()
            .map(|f| listed[f].as_array().map_or(0, Vec::len))
            .sum();
        assert_eq!(asked, entries, "one simulation per listed call: {report}");

        // The reconcile's role loses every grant but its table's reads and writes (the functions halted first: a
        // refused call of theirs would fail the role check after the tests).
        s.halt().await;
        let sdk = apiary_aws::load_sdk_config().await;
        let cfn = aws_sdk_cloudformation::Client::new(&sdk);
        let outputs = cfn.describe_stacks().stack_name(&s.name).send().await.expect("the stack");
        let role = outputs.stacks()[0]
            .outputs()
            .iter()
            .find(|o| o.output_key() == Some("ReconcileRoleArn"))
            .and_then(|o| o.output_value())
            .expect("the reconcile's role")
            .rsplit('/')
            .next()
            .expect("its name")
            .to_owned();
        let narrower = serde_json::json!({"Version": "2012-10-17", "Statement": [{"Effect": "Allow",
            "Action": ["dynamodb:Query", "dynamodb:PutItem", "dynamodb:DeleteItem"], "Resource": "*"}]});
        let iam = aws_sdk_iam::Client::new(&sdk);
        let put = iam.put_role_policy().role_name(&role).policy_name("reconcile").policy_document(narrower.to_string());
        put.send().await.expect("the narrower policy");
        let run = check(&s).await;
        assert_eq!(run.code, 1, "{}\n{}", run.stdout, run.stderr);
        assert!(run.stderr.contains("problem(s)"), "{}", run.stderr);
        let report = run.json();
        let problems: Vec<&serde_json::Value> =
            report["findings"].as_array().expect("findings").iter().filter(|f| f["ok"] == false).collect();
        // The reconcile's calls, and the API, halted with the functions.
        let named = |f: &&serde_json::Value| {
            f["what"].as_str().is_some_and(|w| w.starts_with("reconcile: ") || w == "API /version")
        };
        assert!(problems.iter().all(named), "{report}");
        let table = problems.iter().find(|f| f["what"].as_str().is_some_and(|w| w.ends_with("on table")));
        let table = table.expect("the table's calls refused").to_string();
        assert!(table.contains("dynamodb:ConditionCheckItem implicitDeny"), "{table}");
        assert!(!table.contains("dynamodb:PutItem implicitDeny"), "{table}");
        s.stop().await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_stack_name_finds_the_api_in_the_stacks_outputs_and_says_requests_to_it_are_signed() {
        let s = support::stack().await;
        // The emulator's CloudFormation has the stack `make run` and these tests deploy, with its ApiUrl output.
        let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_apiary"));
        command.args(["--stack", &s.name, "endpoint"]).env_remove("APIARY_API").env_remove("APIARY_PRINCIPAL");
        let out = tokio::task::spawn_blocking(move || command.output()).await.expect("joined").expect("runs");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        assert!(stdout.contains(".execute-api.us-east-1.amazonaws.com/v1"), "{stdout}");
        assert!(stdout.contains("SigV4, execute-api, us-east-1"), "{stdout}");
        let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_apiary"));
        command.args(["--stack", "no-such-stack", "endpoint"]).env_remove("APIARY_API").env_remove("APIARY_PRINCIPAL");
        let out = tokio::task::spawn_blocking(move || command.output()).await.expect("joined").expect("runs");
        assert_eq!(out.status.code(), Some(4), "{}", String::from_utf8_lossy(&out.stderr));
        s.stop().await;
    }
}

/// The variables `export` lines set, as a shell sets them.
fn shell_env(exports: &str) -> std::collections::HashMap<String, String> {
    let script = format!("{exports}\nenv -0");
    let out = std::process::Command::new("sh").arg("-c").arg(script).env_clear().output().expect("sh");
    String::from_utf8_lossy(&out.stdout)
        .split('\0')
        .filter_map(|kv| kv.split_once('=').map(|(k, v)| (k.to_owned(), v.to_owned())))
        .filter(|(k, _)| k.starts_with("APIARY_"))
        .collect()
}
