//! Whole-system scenarios without faults: the four handlers run together on the in-memory world, as deployed.
//! Each known bug of the shell has its scenario here, written to fail before its fix.

use std::collections::BTreeSet;

use apiary_dst::{Options, Request, Sim};
use apiary_planner::events::EventType;
use apiary_planner::machines::MachineState;
use apiary_planner::{condition, find_condition, PowerState, Timestamp};
use apiary_ports::store::{Cond, Key, Store, Write};
use apiary_testkit::cloud::Timings;
use apiary_testkit::hook::Change;
use chrono::{TimeDelta, TimeZone, Utc};
use serde_json::{json, Value};

const ALICE: &str = "arn:aws:iam::123456789012:user/alice";

fn t0() -> Timestamp {
    Utc.with_ymd_and_hms(2026, 11, 23, 9, 0, 0).single().expect("time")
}

fn minutes(m: i64) -> TimeDelta {
    TimeDelta::minutes(m)
}

fn spec(size: i64, running: i64) -> Value {
    json!({
        "size": size,
        "runningCount": running,
        "platform": {"aws": {"region": "us-east-1", "imageId": "ami-0123456789abcdef0", "instanceType": "t3.large", "machineCount": 2}}
    })
}

fn sim_with(pool: &str, spec: Value) -> Sim {
    let mut sim = Sim::new(t0(), Options::deployed(1));
    sim.request(t0(), Request::PutPool { pool: pool.into(), spec });
    sim
}

fn claim(sim: &mut Sim, pool: &str, claim: &str) {
    let at = sim.now();
    sim.request(
        at,
        Request::Claim {
            pool: pool.into(),
            claim: claim.into(),
            owner: ALICE.into(),
            lifetime: None,
            subjects: vec![],
        },
    );
}

fn last_answer(sim: &Sim) -> &Value {
    &sim.answers.last().expect("an answer").body
}

#[test]
fn a_pool_fills_and_a_claim_gets_a_running_cluster_at_once() {
    let mut sim = sim_with("ci", spec(3, 1));
    sim.run_for(minutes(20));
    let snap = sim.world.snapshot("ci").expect("pool");
    assert_eq!(snap.clusters.len(), 3);
    assert!(snap.clusters.iter().all(|c| c.installed_at.is_some()));
    let running: Vec<_> = snap.clusters.iter().filter(|c| c.power_state == Some(PowerState::Running)).collect();
    assert_eq!(running.len(), 1);
    claim(&mut sim, "ci", "job");
    sim.run_for(TimeDelta::seconds(1));
    assert_eq!(sim.answers.last().map(|a| a.status), Some(201), "{}", last_answer(&sim));
    assert_eq!(last_answer(&sim)["phase"], "Ready");
}

/// Bug 1: a resume asked for while the machines were still stopping started nothing (only stopped machines are
/// started) and then only polled, so the claim waited forever.
#[test]
fn a_resume_asked_while_the_machines_are_stopping_completes() {
    let mut sim = sim_with("ci", spec(1, 1));
    sim.world.cloud.set_timings(Timings { stop: minutes(1), ..Timings::default() });
    sim.run_for(minutes(20));
    claim(&mut sim, "ci", "job");
    sim.run_for(TimeDelta::seconds(5));
    let id = last_answer(&sim)["cluster"]["id"].as_str().expect("assigned").to_owned();
    let at = sim.now();
    let (pool, claim, owner) = ("ci".to_owned(), "job".to_owned(), ALICE.to_owned());
    sim.request(at, Request::Power { pool: pool.clone(), claim: claim.clone(), owner: owner.clone(), hibernate: true });
    sim.run_for(TimeDelta::seconds(10));
    assert!(sim.world.cloud.machines().iter().any(|m| m.state == MachineState::Stopping), "stopping");
    let at = sim.now();
    sim.request(at, Request::Power { pool, claim, owner, hibernate: false });
    sim.run_for(minutes(10));
    let c = sim.world.cluster("ci", &id).expect("cluster");
    assert_eq!(c.power_state, Some(PowerState::Running), "{c:?}");
    assert!(sim.world.cloud.machines().iter().all(|m| m.state == MachineState::Running));
}

/// Bug 5: a name lease left behind by a crash (its cluster's item deleted, the lease not) was reused under the
/// old cluster id, so the provisioning request carried the old client token, got the old terminated machines
/// back, and the cluster installed forever.
#[test]
fn a_cluster_made_from_a_leftover_name_lease_installs() {
    let mut sim = sim_with(
        "inv",
        json!({
            "size": 1,
            "platform": {"aws": {"region": "us-east-1", "imageId": "ami-0123456789abcdef0", "instanceType": "t3.large"}},
            "inventory": {"clusterDeployments": [{"name": "foo"}]}
        }),
    );
    sim.run_for(minutes(20));
    let old = sim.world.snapshot("inv").expect("pool").clusters.remove(0);
    assert!(old.installed_at.is_some());
    // Deprovisioned, and the power function died between deleting the item and deleting the lease.
    for m in sim.world.cloud.machines() {
        sim.world.cloud.force(&m.id, MachineState::Terminated);
    }
    let gone = Write::Delete(Key::Cluster(old.id.clone()), Cond::Rev(old.rev));
    futures::executor::block_on(sim.world.store.write("inv", vec![gone])).expect("delete");
    sim.run_for(minutes(40));
    let snap = sim.world.snapshot("inv").expect("pool");
    assert_eq!(snap.clusters.len(), 1);
    let new = &snap.clusters[0];
    assert_eq!(new.cluster_name, "foo");
    assert!(new.installed_at.is_some(), "the new cluster never installed: {new:?}");
}

/// Bug 6: a provision that always fails (a wrong image) broke the cluster at once and the pool replaced it at
/// once, creating and deleting clusters every few seconds for as long as it ran.
#[test]
fn a_provision_that_always_fails_backs_off_instead_of_churning() {
    let mut bad = spec(2, 0);
    bad["platform"]["aws"]["imageId"] = json!("ami-missing");
    let mut sim = sim_with("bad", bad);
    sim.world.cloud.refuse_image("ami-missing");
    let mut seen = BTreeSet::new();
    let churn = sim.run_until(t0() + TimeDelta::hours(2), |s| {
        for c in s.world.snapshot("bad").map(|p| p.clusters).unwrap_or_default() {
            seen.insert(c.id);
        }
        if seen.len() > 40 {
            return Err(format!("{} clusters made by {}", seen.len(), s.now()));
        }
        Ok(())
    });
    assert_eq!(churn, Ok(()));
    assert!(seen.len() <= 12, "{} clusters in two hours", seen.len());
    let calls = sim.world.cloud.calls();
    assert!(calls.get("provision").copied().unwrap_or_default() <= 36, "{calls:?}");
    let snap = sim.world.snapshot("bad").expect("pool");
    let why = snap.clusters.iter().chain(std::iter::empty()).find_map(|c| {
        find_condition(&c.conditions, condition::PROVISION_STOPPED).map(|k| (k.reason.clone(), k.message.clone()))
    });
    let pool_says = find_condition(&snap.pool.status.conditions, "ProvisioningBackoff").map(|k| k.message.clone());
    assert!(why.is_some() || pool_says.is_some(), "the failure is visible on the clusters or the pool: {snap:?}");
}

/// Bug 7: machines that refused to terminate were asked again every 15 seconds, forever, and nothing said so.
#[test]
fn refused_terminations_back_off_and_say_so() {
    let mut sim = sim_with("ci", spec(1, 1));
    sim.run_for(minutes(20));
    claim(&mut sim, "ci", "job");
    sim.run_for(TimeDelta::seconds(5));
    let id = last_answer(&sim)["cluster"]["id"].as_str().expect("assigned").to_owned();
    let infra = sim.world.cluster("ci", &id).expect("cluster").infra_id;
    for m in sim.world.cloud.machines().iter().filter(|m| m.infra_id == infra) {
        sim.world.cloud.refuse(&m.id, Change::Terminate);
    }
    let before = sim.world.cloud.calls().get("terminate").copied().unwrap_or_default();
    let at = sim.now();
    sim.request(at, Request::Release { pool: "ci".into(), claim: "job".into(), owner: ALICE.into() });
    sim.run_for(TimeDelta::hours(1));
    let terminations = sim.world.cloud.calls().get("terminate").copied().unwrap_or_default() - before;
    assert!(terminations <= 20, "{terminations} terminations asked in an hour");
    let c = sim.world.cluster("ci", &id).expect("the refusing cluster is still there");
    let cond = find_condition(&c.conditions, condition::DEPROVISION_FAILED).expect("a DeprovisionFailed condition");
    assert!(cond.message.contains("refuses"), "{cond:?}");
    let docs = sim.world.metrics.documents();
    assert!(docs.iter().any(|d| d["ClustersDeprovisionFailing"].as_f64() == Some(1.0)), "a metric says so");
}

/// A CI fan-out: forty claims at once on a pool with thirty Running spares, interleaved call by call. Thirty get
/// a cluster each at once, none twice; ten find none left, wait (202), and are served oldest first as clusters
/// resume; the burst costs a reconcile per second, not one per claim.
#[test]
fn a_fan_out_of_forty_claims_gets_thirty_spares_at_once_and_the_rest_in_order() {
    let mut sim = Sim::new(t0(), Options { interleave: true, ..Options::deployed(3) });
    sim.request(t0(), Request::PutPool { pool: "ci".into(), spec: spec(40, 30) });
    sim.run_for(minutes(30));
    let snap = sim.world.snapshot("ci").expect("pool");
    assert_eq!(snap.clusters.iter().filter(|c| c.is_assignable()).count(), 30, "thirty Running spares");
    let reconciles = sim.stats.started[0];
    let at = sim.now();
    for i in 0..40 {
        let (pool, claim, owner) = ("ci".into(), format!("job-{i:02}"), ALICE.into());
        sim.request(
            at + TimeDelta::milliseconds(10 * i),
            Request::Claim { pool, claim, owner, lifetime: None, subjects: vec![] },
        );
    }
    let mut checker = apiary_dst::invariants::Checker::default();
    sim.run_until(at + TimeDelta::seconds(5), |s| checker.step(s)).expect("invariants");
    let answers: Vec<_> = sim.answers.iter().filter(|a| a.at >= at).collect();
    assert_eq!(answers.len(), 40);
    let at_once: BTreeSet<&str> =
        answers.iter().filter(|a| a.status == 201).filter_map(|a| a.body["cluster"]["id"].as_str()).collect();
    assert_eq!(at_once.len(), 30, "thirty claims, thirty different spares");
    assert_eq!(answers.iter().filter(|a| a.status == 202).count(), 10);
    assert!(sim.stats.started[0] - reconciles <= 3, "one reconcile per second of the burst");
    // The ten waiting are served as clusters resume, oldest claim first.
    let waiting: BTreeSet<String> =
        answers.iter().filter(|a| a.status == 202).filter_map(|a| a.body["name"].as_str().map(String::from)).collect();
    sim.run_until(at + minutes(20), |s| checker.step(s)).expect("invariants");
    let snap = sim.world.snapshot("ci").expect("pool");
    let mut waited: Vec<_> = snap.claims.iter().filter(|c| waiting.contains(&c.name)).collect();
    assert_eq!(waited.len(), 10);
    assert!(waited.iter().all(|c| c.cluster.is_some()), "every waiting claim served");
    waited.sort_by_key(|c| (c.assigned_at, c.created_at, c.name.clone()));
    let served: Vec<_> = waited.iter().map(|c| (c.created_at, c.name.as_str())).collect();
    let mut fifo = served.clone();
    fifo.sort();
    assert_eq!(served, fifo, "served oldest first");
}

#[test]
fn a_pool_working_through_a_queue_of_claims_is_not_taken_for_stuck() {
    // Seed 202311 (eight hours of faults): a pool at its maxSize had 26 claims queued when the faults stopped. Each
    // claim's cluster came when an earlier claim's lifetime ran out and its cluster was replaced, some cluster
    // always being released, deleted or installed, past the fixed 50 minutes, and the quiet phase took that work
    // for a pool that never converged. A queue drains no faster than the lifetimes before it run out.
    let mut s = spec(10, 10);
    s["maxSize"] = json!(10);
    s["claimLifetime"] = json!({"default": "20m"});
    let mut sim = sim_with("ci", s);
    sim.world.cloud.set_timings(Timings { launch: minutes(5), ..Timings::default() });
    sim.run_for(minutes(30));
    // Ten claims three minutes apart take the ten clusters, which come free three minutes apart; then a queue.
    for i in 0..10 {
        claim(&mut sim, "ci", &format!("early{i}"));
        sim.run_for(minutes(3));
    }
    for i in 0..30 {
        claim(&mut sim, "ci", &format!("queued{i:02}"));
        sim.run_for(TimeDelta::seconds(1));
    }
    let quiet_at = sim.now();
    let mut checker = apiary_dst::invariants::Checker::default();
    let slowest =
        apiary_dst::settle(&mut sim, &mut checker, quiet_at).expect("the queue drains, then the pool converges");
    assert!(slowest > apiary_dst::invariants::POOL_BOUND, "busy for longer than the fixed bound: {slowest}");
    let snap = sim.world.snapshot("ci").expect("pool");
    assert!(snap.claims.iter().all(|k| !k.is_pending()), "every claim was served");
}

/// Seed 004: a pool's clusters hibernated at their install and claimed after their kubelets' first certificates
/// expired come back Running, their nodes' certificate requests approved in the resume and every hostile request
/// beside them left pending, all through the real adapters and the fake cluster API on the simulated clock.
#[test]
fn a_resume_whose_node_certificates_expired_ends_running_with_only_the_kubelets_requests_approved() {
    let mut with_check = spec(2, 0);
    with_check["readiness"] = apiary_dst::SimClouds::readiness();
    let mut sim = sim_with("p0", with_check);
    sim.run_for(minutes(20));
    let snap = sim.world.snapshot("p0").expect("pool");
    assert!(snap.clusters.iter().all(|c| c.power_state == Some(PowerState::Hibernating)), "{:?}", snap.clusters);
    assert!(sim.clouds.csrs().is_empty(), "a fresh cluster's certificates are valid");
    // Past the first certificates' life, asleep all along.
    let valid = TimeDelta::from_std(apiary_dst::FIRST_CERTIFICATES).expect("a duration");
    sim.run_for(valid);
    claim(&mut sim, "p0", "job");
    sim.run_for(minutes(15));
    let snap = sim.world.snapshot("p0").expect("pool");
    let claimed = snap.claims.iter().find(|k| k.name == "job").and_then(|k| k.cluster.clone());
    let claimed = claimed.unwrap_or_else(|| panic!("not assigned: {:#?} {:?}", snap.clusters, sim.clouds.csrs()));
    let c = snap.clusters.iter().find(|c| c.id == claimed).expect("cluster");
    assert_eq!(c.power_state, Some(PowerState::Running), "{c:?}");
    assert!(!c.is_broken(), "{c:?}");
    let csrs: Vec<_> = sim.clouds.csrs().into_iter().filter(|(infra, _)| *infra == c.infra_id).collect();
    let (hostile, kubelets): (Vec<_>, Vec<_>) = csrs.iter().partition(|(_, csr)| csr.hostile());
    // Three nodes, each a client and then a serving request; six hostile requests beside them, one a kubelet's own
    // client request made two hours before the resume, on the cluster's clock, which is the simulation's.
    assert_eq!((kubelets.len(), hostile.len()), (6, 6), "{csrs:?}");
    assert!(kubelets.iter().all(|(_, csr)| csr.approved()), "{kubelets:?}");
    assert!(hostile.iter().all(|(_, csr)| !csr.approved()), "{hostile:?}");
    assert_eq!(c.node_certificates.as_ref().map(|n| (n.approved, n.refused.len())), Some((6, 6)), "{c:?}");
    let told = |kind, says: &str| {
        sim.world.store.trail_has("p0", |e| {
            e.kind == kind && e.cluster.as_deref() == Some(&c.id) && e.message.as_deref().unwrap_or("").contains(says)
        })
    };
    assert!(told(EventType::ClusterRunning, ", 6 node certificate requests approved"));
    assert!(told(EventType::NodeCertificatesApproved, "csr-"));
    assert!(told(EventType::NodeCertificatesLeftPending, "csr-"));
}

/// Issue 59: a change of a claim's lifetime races the reconcile that ends it. Whichever lands first wins, and the
/// answer says which: an extension answered 200 keeps the claim past its old end, one that lost is answered 404 or
/// 409 and the claim is gone; a lifetime shortened to an end already past ends the claim at once.
#[test]
fn a_lifetime_changed_as_the_claim_falls_due_either_keeps_it_or_is_told_it_ended() {
    let mut s = spec(3, 3);
    s["claimLifetime"] = json!({"maximum": "8h"});
    let mut sim = sim_with("ci", s);
    sim.run_for(minutes(20));
    let held =
        |sim: &Sim, name: &str| sim.world.snapshot("ci").is_some_and(|p| p.claims.iter().any(|k| k.name == name));
    // Just before, at, and after the end (past the scheduler's minute and the reconcile it wakes), each on a
    // claim of its own.
    for (name, offset) in [("before", -2), ("at", 0), ("after", 180)] {
        let at = sim.now();
        let (pool, claim) = ("ci".to_owned(), name.to_owned());
        let request =
            Request::Claim { pool, claim, owner: ALICE.into(), lifetime: Some("20m".into()), subjects: vec![] };
        sim.request(at, request);
        sim.run_for(TimeDelta::seconds(1));
        assert_eq!(last_answer(&sim)["phase"], "Ready", "{name}");
        let ends = last_answer(&sim)["expiresAt"].as_str().expect("an end").parse::<Timestamp>().expect("a time");
        let change = Request::Change {
            pool: "ci".into(),
            claim: name.into(),
            by: ALICE.into(),
            lifetime: Some("40m".into()),
            subjects: None,
        };
        sim.request(ends + TimeDelta::seconds(offset), change);
        sim.run_for(ends + TimeDelta::seconds(offset + 1) - sim.now());
        let answer = sim.answers.last().expect("an answer").clone();
        assert!(matches!(answer.request, Request::Change { .. }), "{name}: {answer:?}");
        sim.run_for(minutes(5));
        match answer.status {
            200 => assert!(held(&sim, name), "{name}: extended, yet ended"),
            404 | 409 => assert!(!held(&sim, name), "{name}: told it ended, yet held"),
            other => panic!("{name}: {other} {}", answer.body),
        }
        if offset < 0 {
            assert_eq!(answer.status, 200, "an extension before the end keeps the claim");
        }
        if offset > 0 {
            assert_ne!(answer.status, 200, "an extension three minutes after the end finds the claim ended");
        }
    }
    // Shortened to an end already past: it ends as an expired claim does.
    let at = sim.now();
    let request = Request::Claim {
        pool: "ci".into(),
        claim: "short".into(),
        owner: ALICE.into(),
        lifetime: Some("2h".into()),
        subjects: vec![],
    };
    sim.request(at, request);
    sim.run_for(minutes(5));
    assert!(held(&sim, "short"));
    let at = sim.now();
    let shorten = Request::Change {
        pool: "ci".into(),
        claim: "short".into(),
        by: ALICE.into(),
        lifetime: Some("1m".into()),
        subjects: None,
    };
    sim.request(at, shorten);
    sim.run_for(TimeDelta::seconds(1));
    assert_eq!(sim.answers.last().map(|a| a.status), Some(200));
    sim.run_for(minutes(2));
    assert!(!held(&sim, "short"), "a lifetime shortened past its end ends the claim");
}
