//! `apiary stack delete` against the local stack, alone in its binary: it deletes a CloudFormation stack from the
//! emulator, which holds the emulator a while, so it does not run beside the other command line tests.

mod common;
#[path = "../../tests/support/mod.rs"]
mod support;

use common::{apiary, temp_dir, write, POOL};
use support::ADMIN;

/// The tests that need the emulator, under one name `make unit` skips (`--skip against_stack::`).
mod against_stack {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_stack_is_deleted_only_once_its_pools_are_drained_and_its_table_is_kept() {
        let s = support::stack().await;
        let dir = temp_dir("teardown");
        apiary(&s, ADMIN, &["pool", "apply", "teardown", "-f", &write(&dir, "pool.yaml", POOL)]).await.ok("apply");
        s.converged("teardown", 2, 1).await;
        apiary(&s, ADMIN, &["claim", "teardown", "job-1"]).await.ok("claim");
        // A held claim refuses the deletion, named; nothing is deleted.
        let refused = apiary(&s, ADMIN, &["stack", "delete", &s.name]).await;
        assert_eq!(refused.code, 5, "{}\n{}", refused.stdout, refused.stderr);
        assert!(refused.stderr.contains("teardown/job-1"), "{}", refused.stderr);
        apiary(&s, ADMIN, &["pool", "get", "teardown"]).await.ok("the pool is still there");
        // Told to end the claims: the pools drain (their clusters removed), then the stack goes, the table stays.
        let done = apiary(&s, ADMIN, &["stack", "delete", &s.name, "--end-claims", "--wait", "3m"]).await.ok("delete");
        assert!(done.stdout.contains("pool teardown: draining"), "{}", done.stdout);
        assert!(done.stdout.contains(&format!("stack {} deleted", s.name)), "{}", done.stdout);
        assert!(done.stdout.contains("kept, with its records"), "{}", done.stdout);
        // The kept table, as its operator reads it (the functions' roles went with the stack).
        let pools = s.deps.store.list_pools().await.expect("the kept table");
        assert!(pools.is_empty(), "{pools:?}");
        let filter = apiary_aws::sdk_ec2::types::Filter::builder().name("tag:apiary:pool").values("teardown").build();
        let out = s.ec2.describe_instances().filters(filter).send().await.expect("DescribeInstances");
        let states: Vec<String> = out
            .reservations()
            .iter()
            .flat_map(|r| r.instances())
            .map(|i| i.state().and_then(|st| st.name()).map(|n| n.as_str().to_owned()).unwrap_or_default())
            .collect();
        assert!(!states.is_empty() && states.iter().all(|st| st == "terminated"), "no machine is left: {states:?}");
        let gone = apiary(&s, ADMIN, &["stack", "delete", &s.name]).await;
        assert_eq!(gone.code, 4, "the stack is gone: {}", gone.stderr);
        s.stop().await;
    }
}
