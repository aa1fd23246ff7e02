//! System tests: the whole stack (template deployed into the emulator, the four functions running as
//! `apiary-local` runs them), driven through the HTTP API and the emulator's EC2 API.

mod installers;
mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use apiary_planner::{condition, reason, Cluster};
use apiary_ports::messages::{PowerMessage, ReconcileMessage};
use serde_json::{json, Value};
use support::{aws_pool, stack, ADMIN, ALICE, BOB};

const MINUTE: Duration = Duration::from_secs(60);

/// Seed 002: a transition that timed out says so on the cluster's Hibernating condition, with `why` for reason.
fn assert_timed_out(broken: &Cluster, why: &str) {
    let hibernating = broken.conditions.iter().find(|c| c.type_ == condition::HIBERNATING);
    let hibernating = hibernating.unwrap_or_else(|| panic!("no Hibernating condition: {broken:?}"));
    assert_eq!(hibernating.reason, why, "{broken:?}");
    assert!(hibernating.message.contains("timed out"), "{broken:?}");
}

fn ids(clusters: &[Value]) -> Vec<String> {
    clusters.iter().map(|c| c["id"].as_str().unwrap_or_default().to_owned()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pool_of_four_with_two_running_converges_with_the_two_oldest_running() {
    let s = stack().await;
    s.put_pool("conv", &aws_pool(4, 2)).await;
    let clusters = s.converged("conv", 4, 2).await;
    // Oldest first: the first two run, on EC2 too; the other two are stopped.
    for (i, c) in clusters.iter().enumerate() {
        let want = if i < 2 { "running" } else { "stopped" };
        s.until(&format!("cluster {i} has {want} instances"), MINUTE, || async {
            s.machines_are(c, want).await.then_some(())
        })
        .await;
        assert_eq!(s.instances(c["infraId"].as_str().unwrap_or_default()).await.len(), 2);
    }
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_with_a_running_spare_gets_the_oldest_and_the_next_oldest_is_resumed() {
    let s = stack().await;
    s.put_pool("spare", &aws_pool(4, 2)).await;
    let before = s.converged("spare", 4, 2).await;
    // Seed 000: the pool names its Running spares oldest first, and a claim alone gets the first.
    let oldest: Vec<Value> = before[..2].iter().map(|c| c["id"].clone()).collect();
    s.until("the pool names its spares oldest first", MINUTE, || async {
        let (_, pool) = s.call("GET", "/pools/spare", ADMIN, None).await;
        (pool["status"]["nextSpares"].as_array() == Some(&oldest)).then_some(())
    })
    .await;
    let (status, claim) = s.call("PUT", "/pools/spare/claims/job1", ALICE, None).await;
    assert_eq!(status, 201, "{claim}");
    assert_eq!(claim["cluster"]["id"], before[0]["id"], "the oldest Running cluster is handed out");
    assert_eq!(claim["cluster"]["powerState"], "Running");
    assert!(claim["cluster"]["clusterName"].is_string() && claim["cluster"]["infraId"].is_string());
    // The pool keeps two unclaimed clusters Running: the next-oldest standby is resumed.
    let next = before[2].clone();
    s.until("the next-oldest cluster runs", MINUTE, || async {
        let c = s.clusters("spare").await;
        let now = c.iter().find(|c| c["id"] == next["id"])?.clone();
        (now["powerState"] == "Running" && s.machines_are(&now, "running").await).then_some(())
    })
    .await;
    // The functions reported it as CloudWatch metrics: the assignment delay, the resume's duration, and the
    // pool's gauges with the claimed cluster.
    let metrics = s.metrics();
    let of = |name: &str| metrics.iter().filter(|m| m["Pool"] == "spare" && m[name].is_number()).collect::<Vec<_>>();
    let assigned = of("ClaimAssignmentSeconds");
    assert_eq!(assigned.len(), 1, "one assignment: {assigned:?}");
    assert!(assigned[0]["ClaimAssignmentSeconds"].as_f64().is_some_and(|d| (0.0..5.0).contains(&d)));
    assert!(of("PowerTransitionSeconds").iter().any(|m| m["Transition"] == "Resume"), "a resume was timed");
    assert!(of("ClustersClaimed").iter().any(|m| m["ClustersClaimed"] == 1.0), "gauges show the claim");
    assert!(metrics.iter().all(|m| m["_aws"]["CloudWatchMetrics"][0]["Namespace"] == "Apiary"));
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_without_a_running_spare_is_pending_until_a_standby_cluster_resumes() {
    let s = stack().await;
    s.put_pool("cold", &aws_pool(2, 0)).await;
    let before = s.converged("cold", 2, 0).await;
    let (status, claim) = s.call("PUT", "/pools/cold/claims/job", ALICE, Some(r#"{"lifetime":"1h"}"#)).await;
    assert_eq!(status, 202, "{claim}");
    assert_eq!(claim["phase"], "Pending");
    let ready = s
        .until("the claim is assigned a Running cluster", MINUTE, || async {
            let (_, c) = s.call("GET", "/pools/cold/claims/job?wait=5s", ALICE, None).await;
            (c["phase"] == "Ready").then_some(c)
        })
        .await;
    assert_eq!(ready["cluster"]["id"], before[0]["id"], "the oldest standby cluster was resumed for it");
    assert_eq!(ready["lifetime"], "1h");
    let cluster = s.clusters("cold").await.into_iter().find(|c| c["id"] == before[0]["id"]).expect("cluster");
    assert!(s.machines_are(&cluster, "running").await);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn release_terminates_the_instances_and_the_pool_refills() {
    let s = stack().await;
    s.put_pool("rel", &aws_pool(2, 1)).await;
    s.converged("rel", 2, 1).await;
    let (status, claim) = s.call("PUT", "/pools/rel/claims/job", ALICE, None).await;
    assert_eq!(status, 201, "{claim}");
    let infra = claim["cluster"]["infraId"].as_str().expect("infraId").to_owned();
    let (status, _) = s.call("DELETE", "/pools/rel/claims/job", BOB, None).await;
    assert_eq!(status, 403, "only the owner or an admin releases");
    let (status, body) = s.call("DELETE", "/pools/rel/claims/job", ALICE, None).await;
    assert_eq!(status, 202, "{body}");
    s.until("the released cluster's instances are terminated", MINUTE, || async {
        let i = s.instances(&infra).await;
        (!i.is_empty() && i.iter().all(|(_, st)| st == "terminated" || st == "shutting-down")).then_some(())
    })
    .await;
    let after = s.converged("rel", 2, 1).await;
    assert!(after.iter().all(|c| c["id"] != claim["cluster"]["id"]), "the released cluster is gone");
    let (status, _) = s.call("GET", "/pools/rel/claims/job", ALICE, None).await;
    assert_eq!(status, 404);
    s.stop().await;
}

/// The reaper's look on EC2: one DescribeInstances filtered by the `apiary:pool` tag lists the pool's instances
/// by the infraId of their cluster tag, and never another pool's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reaper_lists_a_pools_instances_by_its_tag_and_no_other_pools() {
    let s = stack().await;
    s.put_pool("mark", &aws_pool(2, 0)).await;
    s.put_pool("else", &aws_pool(1, 0)).await;
    let clusters = s.converged("mark", 2, 0).await;
    s.converged("else", 1, 0).await;
    let spec: apiary_planner::PoolSpec = serde_json::from_value(aws_pool(2, 0)).expect("spec");
    let ec2 = s.deps.platforms.of(&spec).expect("EC2");
    let marked = ec2.marked("mark", &spec, chrono::Utc::now()).await.expect("listed").expect("EC2 lists what it made");
    assert_eq!(marked.len(), 4, "two clusters of two machines: {marked:?}");
    let listed: BTreeSet<&str> = marked.iter().map(|m| m.infra_id.as_str()).collect();
    let known: BTreeSet<&str> = clusters.iter().filter_map(|c| c["infraId"].as_str()).collect();
    assert_eq!(listed, known);
    s.stop().await;
}

/// A pool's tick looks at many clusters on EC2 with one DescribeInstances (by their cluster tags), and finds for
/// each what the one-cluster calls find: machines running, stopped, the install's state; none for a cluster whose
/// instances are not there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_describe_looks_at_many_clusters_as_the_one_cluster_calls_do() {
    let mut s = stack().await;
    s.put_pool("many", &aws_pool(3, 1)).await;
    s.converged("many", 3, 1).await;
    s.halt().await;
    let spec: apiary_planner::PoolSpec = serde_json::from_value(aws_pool(3, 1)).expect("spec");
    let ec2 = s.deps.platforms.of(&spec).expect("EC2");
    let mut clusters = s.deps.store.read_pool("many").await.expect("read").expect("pool").clusters;
    clusters.push(Cluster::new("gone", "gone", "gone-infra", chrono::Utc::now()));
    let now = chrono::Utc::now();
    // The calls this look makes itself, not those of the other tests' functions running beside it.
    let (seen, calls) = apiary_aws::calls::counted(ec2.look_many("many", &spec, &clusters, now)).await;
    let seen = seen.expect("looked").expect("EC2 looks at many");
    assert_eq!(calls.get("ec2:DescribeInstances"), Some(&1), "one call for four: {calls:?}");
    for c in &clusters {
        let t = apiary_ports::platform::Target { pool: "many", spec: &spec, cluster: c, now };
        let one = &seen[&c.id];
        assert_eq!(one.running, ec2.machines_running(t).await.expect("running"), "{}", c.id);
        assert_eq!(one.stopped, ec2.machines_stopped(t).await.expect("stopped"), "{}", c.id);
        assert_eq!(one.install, Some(ec2.install_state(t).await.expect("install")), "{}", c.id);
    }
    let running: Vec<u32> =
        clusters.iter().map(|c| seen[&c.id].running.total - seen[&c.id].running.not_ready.len() as u32).collect();
    assert_eq!(running.iter().filter(|n| **n == 2).count(), 1, "one cluster of two machines runs: {seen:?}");
    assert_eq!(seen["gone"].install, Some(apiary_planner::power::Install::Absent));
    s.stop().await;
}

/// A message put back in its queue (ChangeMessageVisibility) is handed out again when its new visibility ends, not
/// the queue's, and counted one receive more: what a pool's tick link relies on to carry its chain on in its own
/// message (`Queue::return_power`, and the receive count the poller hands the handler as Lambda does), and a failed
/// reconcile to come again in seconds (`Queue::return_reconcile`, on the FIFO queue).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_put_back_comes_again_when_its_new_visibility_ends_one_receive_more() {
    let mut s = stack().await;
    s.halt().await;
    // A long poll the halted consumers left open would take the message: wait their five seconds out.
    tokio::time::sleep(Duration::from_secs(6)).await;
    for fifo in [false, true] {
        let url = if fifo { &s.deps.config.reconcile_queue_url } else { &s.deps.config.power_queue_url };
        let poller = s.poller(url);
        if fifo {
            s.deps.queue.reconcile(&ReconcileMessage::new("none", "claim")).await.expect("send");
        } else {
            s.deps.queue.power(&PowerMessage::tick("none", Some(7)), Duration::ZERO).await.expect("send");
        }
        let first = poller.receive(10, Duration::from_secs(5)).await.expect("receive");
        let receives = |records: &[_]| records.iter().map(apiary_ports::queue::receives).collect::<Vec<u32>>();
        assert_eq!(receives(&first.records), [1], "fifo {fifo}");
        let receipt = first.records[0].receipt_handle.clone().expect("receipt");
        let back = Duration::from_secs(2);
        let put = if fifo {
            s.deps.queue.return_reconcile(&receipt, back).await
        } else {
            s.deps.queue.return_power(&receipt, back).await
        };
        put.expect("put back");
        let hidden = poller.receive(10, Duration::from_secs(1)).await.expect("receive");
        assert!(hidden.records.is_empty(), "fifo {fifo}: hidden for two seconds: {hidden:?}");
        tokio::time::sleep(Duration::from_millis(1200)).await;
        let again = poller.receive(10, Duration::from_secs(5)).await.expect("receive");
        assert_eq!(receives(&again.records), [2], "fifo {fifo}: the same message, once more");
        assert_eq!(again.records[0].message_id, first.records[0].message_id);
        poller.settle(&again, &apiary_ports::queue::batch_response([])).await.expect("delete");
    }
    s.stop().await;
}

/// A pool naming a role in a member account (issue "AWS pools in any account"): its clusters' instances are made
/// in that account, never in Apiary's, and a claim gets one; a pool of another admin naming the same role is
/// refused by STS (its ExternalId is not the one the role trusts), says so on the pool, and makes nothing anywhere.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pool_with_a_member_role_runs_in_that_account_and_no_other_pool_can_use_the_role() {
    let s = support::member_stack(&["member"]).await;
    let role = s.member_role.clone().expect("the member account's role");
    let mut spec = aws_pool(2, 1);
    spec["platform"]["aws"]["roleArn"] = role.clone().into();
    s.put_pool("member", &spec).await;
    let clusters = s.converged("member", 2, 1).await;
    let (status, claim) = s.call("PUT", "/pools/member/claims/job", ALICE, None).await;
    assert_eq!((status, &claim["cluster"]["powerState"]), (201, &json!("Running")), "{claim}");

    let member = s.ec2_in(support::MEMBER_ACCOUNT).await;
    let there = s.pool_instances(&member, "member").await;
    assert_eq!(there.len(), 4, "two clusters of two machines in the member account: {there:?}");
    assert!(there.iter().all(|(_, owner)| owner == support::MEMBER_ACCOUNT), "{there:?}");
    assert!(s.pool_instances(&s.ec2, "member").await.is_empty(), "nothing in Apiary's own account");
    assert!(clusters.iter().all(|c| c["infraId"].is_string()));
    let pool = s.pool("member").await;
    let external_id = pool["status"]["externalId"].as_str().expect("the pool shows its ExternalId").to_owned();
    assert!(external_id.ends_with("-member"), "{external_id}");

    // The role's credentials are kept for the process: looks made now assume nothing; one made within five minutes
    // of their expiry (an hour) assumes the role again, once. A refusal is remembered for a minute.
    let spec_of: apiary_planner::PoolSpec = serde_json::from_value(spec.clone()).expect("spec");
    let ec2 = s.functions().power.deps.platforms.of(&spec_of).expect("EC2");
    let assumed = |before: &BTreeMap<String, u64>| apiary_aws::calls::since(before).get("sts:AssumeRole").copied();
    let now = chrono::Utc::now();
    let before = apiary_aws::calls::snapshot();
    for _ in 0..3 {
        ec2.marked("member", &spec_of, now).await.expect("listed");
    }
    assert_eq!(assumed(&before), None, "the functions' session serves these looks");
    // (The emulator's sessions expire an hour after the real clock; this look is made at a later time.)
    let late = now + chrono::TimeDelta::minutes(56);
    let before = apiary_aws::calls::snapshot();
    let listed = ec2.marked("member", &spec_of, late).await.expect("listed").expect("EC2 lists");
    assert_eq!(listed.len(), 4);
    assert_eq!(assumed(&before), Some(1), "assumed again before the credentials expire");
    let before = apiary_aws::calls::snapshot();
    for at in [now, now, now + chrono::TimeDelta::seconds(30), now + chrono::TimeDelta::seconds(61)] {
        let refused = ec2.marked("stranger", &spec_of, at).await.expect_err("not trusted for this pool");
        assert!(matches!(refused, apiary_ports::Error::Credentials(_)), "{refused}");
    }
    assert_eq!(assumed(&before), Some(2), "a refusal is asked again only after a minute");

    // Another pool naming the same role: refused by the role's trust policy, said on the pool.
    s.put_pool("intruder", &spec).await;
    let message = s.authentication_failure("intruder").await;
    assert!(message.contains(&role) && message.contains("AccessDenied"), "{message}");
    assert!(!message.contains(&external_id), "the message names the intruder's own ExternalId: {message}");
    assert!(s.pool_instances(&member, "intruder").await.is_empty());
    assert!(s.pool_instances(&s.ec2, "intruder").await.is_empty());
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_parallel_claims_on_five_running_spares_get_five_at_once_and_the_rest_later_each_once() {
    let s = stack().await;
    s.put_pool("rush", &aws_pool(5, 5)).await;
    s.converged("rush", 5, 5).await;
    let answers = futures::future::join_all((0..20).map(|i| {
        let s = &s;
        async move { s.call("PUT", &format!("/pools/rush/claims/c{i}"), ALICE, None).await }
    }))
    .await;
    let immediate: Vec<&Value> = answers.iter().filter(|(st, _)| *st == 201).map(|(_, b)| b).collect();
    assert_eq!(immediate.len(), 5, "{answers:?}");
    assert!(answers.iter().all(|(st, _)| *st == 201 || *st == 202), "{answers:?}");
    let first: BTreeSet<&str> = immediate.iter().filter_map(|b| b["cluster"]["id"].as_str()).collect();
    assert_eq!(first.len(), 5, "five different clusters");
    let assigned = s
        .until("all twenty claims are assigned", Duration::from_secs(120), || async {
            let (_, body) = s.call("GET", "/pools/rush/claims", ADMIN, None).await;
            let claims = body["claims"].as_array().cloned().unwrap_or_default();
            (claims.len() == 20 && claims.iter().all(|c| c["cluster"].is_object())).then_some(claims)
        })
        .await;
    let mut holders: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for c in &assigned {
        holders.entry(c["cluster"]["id"].as_str().unwrap_or_default().into()).or_default().push(c["name"].to_string());
    }
    assert_eq!(holders.len(), 20, "no cluster in two claims: {holders:?}");
    // Each cluster names exactly the claim that names it.
    let clusters = s.clusters("rush").await;
    for c in &assigned {
        let id = &c["cluster"]["id"];
        let cluster = clusters.iter().find(|k| &k["id"] == id).expect("assigned cluster exists");
        assert_eq!(cluster["claim"], c["name"]);
    }
    s.stop().await;
}

/// A claim by labels reads the pools that carry them in one BatchGetItem: on AWS a claim API whose role lacks it
/// could serve none.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_by_labels_is_served_by_the_pool_that_carries_them() {
    let s = stack().await;
    let mut spec = aws_pool(1, 1);
    spec["labels"] = json!({"team": "a"});
    s.put_pool("labelled", &spec).await;
    s.converged("labelled", 1, 1).await;
    let body = json!({"selector": {"matchLabels": {"team": "a"}}}).to_string();
    let (status, claim) = s.call("PUT", "/claims/by-labels", ALICE, Some(&body)).await;
    assert_eq!((status, &claim["pool"]), (201, &json!("labelled")), "{claim}");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_inventory_of_three_names_gives_three_clusters_even_with_parallel_reconciles() {
    let s = stack().await;
    let mut spec = aws_pool(5, 0);
    spec["inventory"] = json!({"clusterDeployments": [{"name": "foo"}, {"name": "bar"}, {"name": "baz"}]});
    s.put_pool("inv", &spec).await;
    // Five reconciles at once, beside the queue's own: the name leases let one of each race win.
    let results = futures::future::join_all((0..5).map(|_| reconcile::reconcile(&s.deps, "inv"))).await;
    // A reconcile that keeps losing races gives up with a conflict (its message would go back to the queue);
    // nothing else may go wrong.
    for r in &results {
        assert!(matches!(r, Ok(_) | Err(apiary_ports::Error::Conflict(_))), "{r:?}");
    }
    assert!(results.iter().any(Result::is_ok), "someone wins each race");
    let clusters = s.converged("inv", 3, 0).await;
    let names: BTreeSet<&str> = clusters.iter().filter_map(|c| c["clusterName"].as_str()).collect();
    assert_eq!(names, BTreeSet::from(["bar", "baz", "foo"]));
    // Still three after more reconciles and sweeps.
    for _ in 0..3 {
        let r = reconcile::reconcile(&s.deps, "inv").await;
        assert!(matches!(r, Ok(_) | Err(apiary_ports::Error::Conflict(_))), "{r:?}");
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(s.clusters("inv").await.len(), 3);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn changing_the_platform_replaces_stale_clusters_one_at_a_time() {
    let s = stack().await;
    s.put_pool("stale", &aws_pool(3, 1)).await;
    let old = ids(&s.converged("stale", 3, 1).await);
    let old_version = s.pool("stale").await["status"]["poolVersion"].clone();
    let mut spec = aws_pool(3, 1);
    spec["platform"]["aws"]["instanceType"] = json!("m5.large");
    s.put_pool("stale", &spec).await;
    s.until("the pool's version changes", MINUTE, || async {
        (s.pool("stale").await["status"]["poolVersion"] != old_version).then_some(())
    })
    .await;
    let most_replacing = std::cell::Cell::new(0);
    let fresh = s
        .until("every stale cluster is replaced", Duration::from_secs(120), || {
            let s = &s;
            let most = &most_replacing;
            async move {
                let version = s.pool("stale").await["status"]["poolVersion"].as_str()?.to_owned();
                let c = s.clusters("stale").await;
                // One at a time: never more than one replacement installing at once.
                let replacing = c.iter().filter(|c| c["installedAt"].is_null() && c["deleting"].is_null()).count();
                most.set(most.get().max(replacing));
                let current = c.iter().filter(|c| c["poolVersion"].as_str() == Some(version.as_str())).count();
                (c.len() == 3 && current == 3 && c.iter().all(|c| c["deleting"].is_null())).then_some(c)
            }
        })
        .await;
    assert!(ids(&fresh).iter().all(|id| !old.contains(id)), "every old cluster was replaced");
    let most = most_replacing.get();
    assert!(most <= 1, "one replacement at a time, saw {most} installing at once");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_whose_instances_vanished_fails_to_resume_is_marked_broken_and_replaced() {
    let s = stack().await;
    let mut spec = aws_pool(1, 0);
    spec["powerstateTransitionToRunningTimeout"] = json!("3s");
    s.put_pool("lost", &spec).await;
    let before = s.converged("lost", 1, 0).await;
    let victim = before[0].clone();
    let infra = victim["infraId"].as_str().expect("infraId");
    let doomed: Vec<String> = s.instances(infra).await.into_iter().map(|(id, _)| id).collect();
    s.ec2.terminate_instances().set_instance_ids(Some(doomed)).send().await.expect("terminate behind Apiary's back");
    let (status, _) = s.call("PUT", "/pools/lost/claims/job", ALICE, None).await;
    assert_eq!(status, 202);
    // Seed 002: the Hibernating condition carries the reason and the timed-out message. Read from what the functions
    // wrote: the pool deletes a broken cluster within a reconcile, often before any look through the API.
    let broken = s.written_broken(&victim["id"]).await;
    assert_timed_out(&broken, reason::FAILED_TO_START);
    // The pool replaces it, and the claim is served by the replacement.
    let served = s
        .until("the claim is served by a replacement", MINUTE, || async {
            let (_, c) = s.call("GET", "/pools/lost/claims/job", ALICE, None).await;
            (c["phase"] == "Ready").then_some(c)
        })
        .await;
    assert_ne!(served["cluster"]["id"], victim["id"]);
    s.until("the broken cluster is gone", MINUTE, || async {
        s.clusters("lost").await.iter().all(|c| c["id"] != victim["id"]).then_some(())
    })
    .await;
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_message_kind_delivered_twice_leaves_the_same_state() {
    let s = stack().await;
    s.put_pool("dup", &aws_pool(3, 1)).await;
    s.converged("dup", 3, 1).await;
    let (status, _) = s.call("PUT", "/pools/dup/claims/job", ALICE, None).await;
    assert_eq!(status, 201);
    let settled = |c: &[Value]| c.iter().all(|c| matches!(c["powerState"].as_str(), Some("Running" | "Hibernating")));
    s.until("the pool settles after the claim", MINUTE, || async {
        let c = s.clusters("dup").await;
        (c.len() == 4 && settled(&c) && c.iter().filter(|c| c["powerState"] == "Running").count() == 2).then_some(())
    })
    .await;
    // Quiet: the pool's status counts the settled clusters (the reconcile that follows the last power step has
    // run), and nothing changes for two seconds. Without the first half, a reconcile still queued behind a busy
    // emulator would rightly update the status during the duplicates below.
    let current = |p: &Value| {
        let st = &p["status"];
        [("claimed", 1), ("ready", 1), ("standby", 2), ("installing", 0), ("pendingClaims", 0)]
            .iter()
            .all(|(k, n)| st[*k] == json!(n))
    };
    let (before, pool_before) = s
        .until("the pool is quiet", MINUTE, || async {
            let first = (s.clusters("dup").await, s.pool("dup").await);
            tokio::time::sleep(Duration::from_secs(2)).await;
            let second = (s.clusters("dup").await, s.pool("dup").await);
            (first == second && current(&second.1)).then_some(second)
        })
        .await;
    let q = &s.deps.queue;
    for _ in 0..2 {
        for reason in ["claim", "sweep", "schedule"] {
            q.reconcile(&ReconcileMessage::new("dup", reason)).await.expect("send");
        }
        for c in &before {
            let msg = PowerMessage::nudge("dup", c["id"].as_str().unwrap_or_default());
            q.power(&msg, Duration::ZERO).await.expect("send");
        }
        timeouts::sweep(&s.deps, true).await.expect("sweep");
    }
    tokio::time::sleep(Duration::from_secs(6)).await;
    let after = s.clusters("dup").await;
    assert_eq!(after, before, "clusters (revisions included) are unchanged");
    let pool_after = s.pool("dup").await;
    assert_eq!(pool_after, pool_before, "the pool (revision and status) is unchanged");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_get_400_naming_the_field_and_other_principals_get_403() {
    let s = stack().await;
    let cases: &[(&str, &str)] = &[
        (r#"{"size": -1, "platform": {"fake": {}}}"#, "size"),
        (r#"{"size": 2, "runningCount": -3, "platform": {"fake": {}}}"#, "runningCount"),
        (r#"{"size": 2, "hibernateAfter": "soon", "platform": {"fake": {}}}"#, "hibernateAfter"),
        (
            r#"{"size": 2, "platform": {"fake": {}}, "inventory": {"clusterDeployments": [{"name": "a"}, {}]}}"#,
            "inventory.clusterDeployments[1].name",
        ),
        (r#"{"size": 2, "platform": {"fake": {}}, "colour": "blue"}"#, "colour"),
        (r#"{"size": "two", "platform": {"fake": {}}}"#, "size"),
        (r#"{"size": 2}"#, "platform"),
        (r#"not json"#, "body"),
    ];
    for (body, field) in cases {
        let (status, answer) = s.call("PUT", "/pools/bad", ADMIN, Some(body)).await;
        assert_eq!(status, 400, "{body}: {answer}");
        let fields: Vec<&str> =
            answer["fields"].as_array().into_iter().flatten().filter_map(|f| f["field"].as_str()).collect();
        assert!(fields.iter().any(|f| f.starts_with(field) || f.contains(field)), "{body}: want {field}, got {answer}");
    }
    let (status, _) = s.call("PUT", "/pools/Bad_Name", ADMIN, Some(r#"{"size":1,"platform":{"fake":{}}}"#)).await;
    assert_eq!(status, 400);
    let (status, _) = s.call("PUT", "/pools/ok", ALICE, Some(r#"{"size":1,"platform":{"fake":{}}}"#)).await;
    assert_eq!(status, 403, "only admins manage pools");
    s.put_pool("ok", &json!({"size": 1, "platform": {"fake": {}}})).await;
    let (status, answer) = s.call("PUT", "/pools/ok/claims/c1", ALICE, Some(r#"{"lifetime": "forever"}"#)).await;
    assert_eq!((status, answer["fields"][0]["field"].as_str()), (400, Some("lifetime")), "{answer}");
    let (status, answer) = s.call("PUT", "/pools/ok/claims/c1", ALICE, Some(r#"{"owner": "me"}"#)).await;
    assert_eq!((status, answer["fields"][0]["field"].as_str()), (400, Some("owner")), "{answer}");
    let (status, _) = s.call("PUT", "/pools/ok/claims/UPPER", ALICE, None).await;
    assert_eq!(status, 400);
    let (status, _) = s.call("PUT", "/pools/missing/claims/c1", ALICE, None).await;
    assert_eq!(status, 404);
    let (status, _) = s.call("PUT", "/pools/ok/claims/c1", ALICE, None).await;
    assert!(status == 201 || status == 202);
    let (status, answer) = s.call("GET", "/pools/ok/claims/c1?wait=forever", ALICE, None).await;
    assert_eq!((status, answer["fields"][0]["field"].as_str()), (400, Some("wait")), "{answer}");
    for (method, path) in
        [("GET", "/pools/ok/claims/c1"), ("DELETE", "/pools/ok/claims/c1"), ("POST", "/pools/ok/claims/c1/hibernate")]
    {
        let (status, answer) = s.call(method, path, BOB, None).await;
        assert_eq!(status, 403, "{method} {path} by another principal: {answer}");
    }
    let (status, _) = s.call("GET", "/pools/ok/claims/c1", ADMIN, None).await;
    assert_eq!(status, 200, "an admin may read any claim");
    let (status, _) = s.call("GET", "/pools/ok/claims/nope", ALICE, None).await;
    assert_eq!(status, 404);
    // A team's pool, BOB's alone: only a stack admin creates it, ALICE neither sees nor claims from it, BOB
    // administers it.
    let team = json!({"size": 1, "platform": {"fake": {}}, "access": {"admins": [BOB]}});
    let (status, _) = s.call("PUT", "/pools/team-b", BOB, Some(&team.to_string())).await;
    assert_eq!(status, 403, "only a stack admin creates a pool");
    s.put_pool("team-b", &team).await;
    let (status, answer) = s.call("PUT", "/pools/team-b/claims/c1", ALICE, None).await;
    assert_eq!(status, 403, "{answer}");
    let (_, listed) = s.call("GET", "/pools", ALICE, None).await;
    assert!(!listed["pools"].as_array().into_iter().flatten().any(|p| p["name"] == "team-b"), "{listed}");
    let (status, me) = s.call("GET", "/me", BOB, None).await;
    assert_eq!((status, &me["administer"]), (200, &json!(["team-b"])), "{me}");
    let (status, answer) = s.call("DELETE", "/pools/team-b", BOB, None).await;
    assert_eq!(status, 202, "{answer}");
    // Schedules are kept as EventBridge Scheduler schedules: created, updated, then deleted with the pool spec.
    let mut scheduled = json!({"size": 1, "platform": {"fake": {}},
        "schedules": [{"name": "office", "cron": "0 8 * * 1-5", "timeZone": "Europe/Berlin", "duration": "10h", "runningCount": 1}]});
    let (status, answer) = s.call("PUT", "/pools/sched", ADMIN, Some(&scheduled.to_string())).await;
    assert_eq!(status, 201, "{answer}");
    scheduled["schedules"][0]["cron"] = json!("30 7 * * 1-5");
    let (status, answer) = s.call("PUT", "/pools/sched", ADMIN, Some(&scheduled.to_string())).await;
    assert_eq!(status, 200, "{answer}");
    scheduled["schedules"] = json!([]);
    let (status, answer) = s.call("PUT", "/pools/sched", ADMIN, Some(&scheduled.to_string())).await;
    assert_eq!(status, 200, "{answer}");
    let (status, doc) = s.call("GET", "/openapi.json", ALICE, None).await;
    assert_eq!((status, doc["openapi"].as_str().map(|v| v.starts_with('3'))), (200, Some(true)));
    s.stop().await;
}

/// Bug 10: under load the local stack lost or delayed messages: four pools of 3-second installs created at once
/// while twenty claims ran on a fifth pool took 2 to 4 minutes to install (alone, 5 seconds). Every message must
/// be delivered, and every cluster installed well within the minutes the bug took: within one minute, a bound
/// loose enough for a loaded CI machine (it once took 21 s while a release build shared the two cores), tight
/// enough that lost or delayed messages (a six-minute visibility timeout) still fail it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_pools_install_within_a_minute_while_twenty_claims_run_on_a_fifth() {
    let s = stack().await;
    s.put_pool("busy", &aws_pool(5, 5)).await;
    s.converged("busy", 5, 5).await;
    let started = tokio::time::Instant::now();
    let fake = json!({"size": 3, "platform": {"fake": {"installDuration": "3s"}}});
    let pools = ["fa", "fb", "fc", "fd"];
    let load = futures::future::join_all((0..20).map(|i| {
        let s = &s;
        async move { s.call("PUT", &format!("/pools/busy/claims/c{i}"), ALICE, None).await }
    }));
    let create = futures::future::join_all(pools.iter().map(|p| s.put_pool(p, &fake)));
    let (answers, _) = futures::join!(load, create);
    assert!(answers.iter().all(|(st, _)| *st == 201 || *st == 202), "{answers:?}");
    for p in pools {
        s.until(&format!("pool {p} has three installed clusters"), MINUTE, || async {
            let c = s.clusters(p).await;
            (c.len() == 3 && c.iter().all(|c| c["installedAt"].is_string())).then_some(())
        })
        .await;
    }
    let took = started.elapsed();
    assert!(took <= MINUTE, "the four pools took {took:?}");
    s.stop().await;
}

/// A cloud reached over HTTP, as the system tests drive it: its pool spec, how to read a cluster's machines, and
/// how to make one machine's boot hang.
struct Cloud {
    /// The platform part of a pool's spec.
    platform: Value,
    /// The states of a cluster's machines (by its infraId), in name order.
    machines: fn(&apiary_local::clouds::DemoClouds, &str) -> Vec<String>,
    /// A machine's state when it runs, and when it is hibernated.
    running: &'static str,
    stopped: &'static str,
    /// Makes machine `<infraId>-1` hang when it next boots; the second undoes it.
    stick: fn(&apiary_local::clouds::DemoClouds, &str),
    comply: fn(&apiary_local::clouds::DemoClouds, &str),
}

fn gcp(clouds: &apiary_local::clouds::DemoClouds) -> Cloud {
    Cloud {
        platform: json!({"gcp": {
            "project": apiary_local::clouds::DEMO_PROJECT,
            "zones": ["europe-west1-b", "europe-west1-c"],
            "instanceTemplate": "apiary-node",
            "machineCount": 3,
            "credentialsSecret": clouds.gcp_credentials,
        }}),
        machines: |c, infra| {
            let prefix = format!("{infra}-");
            c.gcp
                .instances(apiary_local::clouds::DEMO_PROJECT)
                .into_iter()
                .filter(|(_, n, _)| n.starts_with(&prefix))
                .map(|(_, _, s)| s)
                .collect()
        },
        running: "RUNNING",
        stopped: "TERMINATED",
        stick: |c, infra| c.gcp.stick(&format!("{infra}-1")),
        comply: |c, infra| c.gcp.comply(&format!("{infra}-1")),
    }
}

fn azure(clouds: &apiary_local::clouds::DemoClouds) -> Cloud {
    let template: Value = serde_json::from_str(include_str!("../infra/demo-pool-azure.json")).expect("demo pool");
    Cloud {
        platform: json!({"azure": {
            "subscriptionId": apiary_local::clouds::DEMO_SUBSCRIPTION,
            "tenantId": apiary_local::clouds::DEMO_TENANT,
            "location": "westeurope",
            "template": template["platform"]["azure"]["template"],
            "credentialsSecret": clouds.azure_credentials,
        }}),
        machines: |c, infra| {
            let group = format!("{infra}-rg");
            c.azure
                .vms(apiary_local::clouds::DEMO_SUBSCRIPTION)
                .into_iter()
                .filter(|(rg, _, _)| *rg == group)
                .map(|(_, _, p)| p)
                .collect()
        },
        running: "running",
        stopped: "deallocated",
        stick: |c, infra| c.azure.stick(&format!("{infra}-1")),
        comply: |c, infra| c.azure.comply(&format!("{infra}-1")),
    }
}

fn vsphere(clouds: &apiary_local::clouds::DemoClouds) -> Cloud {
    Cloud {
        platform: json!({"vsphere": {
            "server": clouds.vsphere.server(),
            "datacenter": "DC1",
            "template": "rhcos",
            "folder": "apiary",
            "machineCount": 3,
            "credentialsSecret": clouds.vsphere_credentials,
            "caBundle": clouds.vsphere.ca_bundle(),
            "shutdownGracePeriod": "5s",
        }}),
        machines: |c, infra| {
            let prefix = format!("{infra}-");
            c.vsphere.vms().into_iter().filter(|(_, n, _)| n.starts_with(&prefix)).map(|(_, _, p)| p).collect()
        },
        running: "POWERED_ON",
        stopped: "POWERED_OFF",
        // A guest that never boots: powered on, its tools never run, so its nodes are never ready.
        stick: |c, infra| c.vsphere.stick(&format!("{infra}-1")),
        comply: |c, infra| c.vsphere.comply(&format!("{infra}-1")),
    }
}

/// A pool of `size` three-machine clusters on `cloud`, `running` kept Running, resumes timing out after 8 s.
fn cloud_pool(cloud: &Cloud, size: i64, running: i64) -> Value {
    json!({"size": size, "runningCount": running, "powerstateTransitionToRunningTimeout": "8s", "platform": cloud.platform})
}

/// Seed 003's and 002's story on one cloud, through the HTTP API: the pool fills, a claim gets the Running
/// cluster at once, the claimant hibernates and resumes it, and a resume that never completes is marked broken and
/// replaced, the replacement serving the waiting claim.
async fn cloud_story(s: &support::Stack, pick: fn(&apiary_local::clouds::DemoClouds) -> Cloud) {
    let clouds = s.clouds.as_ref().expect("a stack with the fake clouds");
    let cloud = pick(clouds);
    let machines = |c: &Value| (cloud.machines)(clouds, c["infraId"].as_str().expect("infraId"));
    let (on, off) = ([cloud.running; 3], [cloud.stopped; 3]);
    s.put_pool("p", &cloud_pool(&cloud, 2, 1)).await;
    let before = s.converged("p", 2, 1).await;
    let running = before.iter().find(|c| c["powerState"] == "Running").expect("a Running cluster").clone();
    let standby = before.iter().find(|c| c["powerState"] == "Hibernating").expect("a standby cluster").clone();
    assert_eq!(machines(&running), on);
    assert_eq!(machines(&standby), off, "the standby cluster is stopped");

    // A claim gets the Running cluster at once; the standby one is resumed to keep a spare running.
    let (status, claim) = s.call("PUT", "/pools/p/claims/job", ALICE, None).await;
    assert_eq!(status, 201, "{claim}");
    assert_eq!(claim["cluster"]["id"], running["id"]);
    s.until("the standby cluster runs", MINUTE, || async { (machines(&standby) == on).then_some(()) }).await;

    // The claimant hibernates its cluster and resumes it.
    let (status, body) = s.call("POST", "/pools/p/claims/job/hibernate", ALICE, None).await;
    assert_eq!(status, 202, "{body}");
    s.until("the claimed cluster is stopped", MINUTE, || async { (machines(&running) == off).then_some(()) }).await;
    let (status, body) = s.call("POST", "/pools/p/claims/job/resume", ALICE, None).await;
    assert_eq!(status, 202, "{body}");
    s.until("the claimed cluster runs again", MINUTE, || async {
        let (_, c) = s.call("GET", "/pools/p/claims/job", ALICE, None).await;
        (c["phase"] == "Ready" && machines(&running) == on).then_some(())
    })
    .await;

    // A resume that never completes: the spare is hibernated, one of its machines hangs when it boots, and a
    // second claim waits on it. The transition times out, the cluster is broken and replaced, and the claim is
    // served by the replacement.
    s.put_pool("p", &cloud_pool(&cloud, 2, 0)).await;
    let spare = s
        .until("the spare is hibernated", MINUTE, || async {
            let c = s.clusters("p").await.into_iter().find(|c| c["id"] == standby["id"])?;
            (c["powerState"] == "Hibernating" && machines(&c) == off).then_some(c)
        })
        .await;
    let infra = spare["infraId"].as_str().expect("infraId");
    (cloud.stick)(clouds, infra);
    let (status, _) = s.call("PUT", "/pools/p/claims/job2", BOB, None).await;
    assert_eq!(status, 202);
    assert_timed_out(&s.written_broken(&spare["id"]).await, reason::FAILED_TO_START);
    let served = s
        .until("the second claim is served by a replacement", MINUTE, || async {
            let (_, c) = s.call("GET", "/pools/p/claims/job2", BOB, None).await;
            (c["phase"] == "Ready").then_some(c)
        })
        .await;
    assert_ne!(served["cluster"]["id"], spare["id"]);
    (cloud.comply)(clouds, infra);
    s.until("the broken cluster's machines are deleted", MINUTE, || async {
        machines(&spare).is_empty().then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gcp_pool_fills_serves_a_claim_hibernates_resumes_and_replaces_a_stuck_resume() {
    let s = support::clouds_stack().await;
    cloud_story(&s, gcp).await;
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_azure_pool_fills_serves_a_claim_hibernates_resumes_and_replaces_a_stuck_resume() {
    let s = support::clouds_stack().await;
    cloud_story(&s, azure).await;
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_vsphere_pool_fills_serves_a_claim_hibernates_resumes_and_replaces_a_stuck_resume() {
    let s = support::clouds_stack().await;
    cloud_story(&s, vsphere).await;
    s.stop().await;
}

/// Another team's pool naming the demo's GCP credentials and installer key, which are tagged (`apiary:pools`) for
/// the pools `p` and `w` only: the power function reads neither for it, the pool's `AuthenticationFailure`
/// condition says why, and nothing is made in the project or asked of the installer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pool_naming_another_teams_secrets_is_refused_them_and_makes_nothing() {
    let s = support::clouds_stack().await;
    let clouds = s.clouds.as_ref().expect("the fake clouds");
    s.put_pool("x", &cloud_pool(&gcp(clouds), 1, 1)).await;
    let message = s.authentication_failure("x").await;
    assert!(message.contains(&clouds.gcp_credentials) && message.contains("apiary:pools"), "{message}");
    assert!(message.contains("pool x"), "{message}");
    let mut spec: Value = serde_json::from_str(include_str!("../infra/demo-pool-installer.json")).expect("demo pool");
    clouds.fill(&mut spec);
    s.put_pool("y", &spec).await;
    let message = s.authentication_failure("y").await;
    assert!(message.contains(&clouds.webhook_secret) || message.contains(&clouds.gcp_credentials), "{message}");
    assert!(clouds.gcp.instances(apiary_local::clouds::DEMO_PROJECT).is_empty(), "nothing made for x or y");
    assert!(clouds.webhook.clusters().is_empty(), "nothing asked of the installer for y");
    s.stop().await;
}
