//! A seeded workload: a few pools with varied specs (a quarter with the adaptive count and `keepFresh`, over a
//! third with the Kubernetes readiness check, whose resumes may need node certificates approved), each on
//! one of four clouds (EC2 in memory, or GCP, Azure or vSphere through their real adapters and fakes), then
//! claims (some with lifetimes), releases, hibernate and resume requests, and pool edits (size, runningCount,
//! maxConcurrent, inventory, platform, schedules) spread over the chaos phase, now and then a pool deleted, and
//! now and then a burst of claims on one pool at once (a CI fan-out, racing for the spares). Some claims name
//! labels instead of a pool (each pool carries its cloud and a tier), and are found by name afterwards. Two pools'
//! claims are told to a notification receiver that is down now and then. Two pools, when on GCP, install through
//! the reference OpenShift installer ([`INSTALLED`]). Every pool bounds its
//! power transitions and installs, so a stuck machine is caught and replaced (with no timeout set it would
//! rightly wait forever).

use apiary_planner::Timestamp;
use apiary_testkit::time::SplitMix;
use chrono::TimeDelta;
use serde_json::{json, Value};

use crate::sim::Request;

/// Principals making claims.
pub const OWNERS: [&str; 3] =
    ["arn:aws:iam::123456789012:user/alice", "arn:aws:iam::123456789012:user/bob", "arn:aws:iam::123456789012:role/ci"];

const NAMES: [&str; 6] = ["red", "green", "blue", "cyan", "amber", "plum"];

/// The clouds a pool may be on: EC2 in memory, and the three fakes behind the real HTTP adapters.
pub const CLOUDS: [&str; 4] = ["aws", "gcp", "azure", "vsphere"];

/// A random pool spec on `cloud`; `version` changes what shapes its clusters (never where they live).
fn spec(rng: &mut SplitMix, version: u64, cloud: &str) -> Value {
    let size = 1 + rng.below(4) as i64;
    let machines = 1 + rng.below(3);
    let platform = match cloud {
        "aws" => json!({"aws": {
            "region": "us-east-1",
            "imageId": "ami-0123456789abcdef0",
            "instanceType": if version.is_multiple_of(2) { "m5.large" } else { "m5.xlarge" },
            "machineCount": machines
        }}),
        other => crate::clouds::SimClouds::platform(other, machines, version),
    };
    let mut spec = json!({
        "size": size,
        "runningCount": rng.below(size as u64 + 2),
        "powerstateTransitionToRunningTimeout": "15m",
        "powerstateTransitionToHibernatingTimeout": "15m",
        "installTimeout": "20m",
        "platform": platform,
    });
    if size % 2 == 1 {
        // Half the pools reap as often and as soon as a pool may; the others keep the defaults.
        spec["reaper"] = json!({"every": "5m", "grace": "30m"});
    }
    if rng.chance(0.5) {
        spec["maxConcurrent"] = json!(1 + rng.below(3));
    }
    if rng.chance(0.3) {
        spec["maxSize"] = json!(size + 2 + rng.below(4) as i64);
    }
    if rng.chance(0.3) {
        let n = 1 + rng.below(NAMES.len() as u64) as usize;
        // Each entry's parameters follow the size's parity (no draw of `rng`): an edit that flips it changes every
        // entry, and the pool replaces each unclaimed cluster made with the old ones (issue 61).
        let names: Vec<Value> = NAMES[..n]
            .iter()
            .enumerate()
            .map(|(i, n)| json!({ "name": n, "parameters": { "apiVIP": format!("10.0.{}.{i}", size % 2) } }))
            .collect();
        spec["inventory"] = json!({ "clusterDeployments": names });
    }
    if rng.chance(0.3) {
        spec["hibernateAfter"] = json!("20m");
    }
    if rng.chance(0.4) {
        spec["claimLifetime"] = json!({"default": "30m", "maximum": "1h"});
    }
    if rng.chance(0.2) {
        spec["schedules"] = json!([{"name": "hourly", "cron": "0 * * * *", "duration": "20m", "runningCount": size}]);
    }
    // A quarter keep just-installed clusters up under the adaptive count (power states that follow the claims as
    // they come), drawn aside so that the rest of each seed's workload stays as it was.
    let mut aside = SplitMix::new(rng.clone().below(u64::MAX) ^ 0x6b65_6570_6672_6573);
    if aside.chance(0.25) {
        spec["adaptiveRunningCount"] = json!({"instantShare": 0.9, "keepFresh": true});
    }
    // Over a third look at their clusters' nodes and operators through the Kubernetes readiness check, so that
    // their resumes approve the certificate requests of nodes whose certificates expired while hibernated.
    if aside.chance(0.4) {
        spec["readiness"] = crate::clouds::SimClouds::readiness();
    }
    // Every pool carries its cloud as a label, and most a tier, for the claims by labels.
    spec["labels"] = json!({ "cloud": cloud, "tier": if aside.chance(0.7) { "ci" } else { "other" } });
    spec
}

/// The pools whose clusters, when on GCP, the reference OpenShift installer installs: `p1` and `p3`, for all their
/// life (a pool keeps its cloud as it keeps its installer: a cluster is removed the way its pool's spec says now).
pub const INSTALLED: [&str; 2] = ["p1", "p3"];

/// `spec` (on `cloud`) with the reference installer as its provisioner, for a pool of [`INSTALLED`] on GCP; its
/// installs launch as many machines as the pool names.
fn installed(pool: &str, cloud: &str, mut spec: Value) -> Value {
    if cloud == "gcp" && INSTALLED.contains(&pool) {
        spec["provisioner"] = crate::installer::provisioner();
        spec["platform"]["gcp"]["machineCount"] = json!(crate::installer::MACHINES);
        spec["baseDomain"] = json!("sim.example.com");
    }
    spec
}

/// The pools whose claims the simulation's notification receiver hears (issue 59): `p0` and `p2`, whatever their
/// spec, so that a notification's pool still has its hook when it is delivered.
pub const NOTIFIED: [&str; 2] = ["p0", "p2"];

/// `spec` with the receiver as its `notify` webhook, for a pool of [`NOTIFIED`].
fn notified(pool: &str, mut spec: Value) -> Value {
    if NOTIFIED.contains(&pool) {
        spec["notify"] = crate::clouds::SimClouds::notify();
    }
    spec
}

/// The labels a claim by labels names: every CI pool, or the CI pools of one cloud (which may be none).
fn selector(rng: &mut SplitMix, clouds: &[&str]) -> std::collections::BTreeMap<String, String> {
    let mut labels = std::collections::BTreeMap::from([("tier".to_owned(), "ci".to_owned())]);
    if rng.chance(0.5) {
        labels.insert("cloud".into(), clouds[rng.below(clouds.len() as u64) as usize].to_owned());
    }
    labels
}

/// An owner other than `owner`.
fn other(owner: &str, rng: &mut SplitMix) -> String {
    let others: Vec<&str> = OWNERS.iter().copied().filter(|o| *o != owner).collect();
    others[rng.below(others.len() as u64) as usize].to_owned()
}

/// Who acts on a claim of `owner` shared with `subjects`: mostly the owner, sometimes a subject.
fn actor(owner: &str, subjects: &[String], rng: &mut SplitMix) -> String {
    match subjects {
        [] => owner.to_owned(),
        _ if rng.chance(0.5) => owner.to_owned(),
        _ => subjects[rng.below(subjects.len() as u64) as usize].clone(),
    }
}

/// The requests of one run: at `start`, pools; then, until `start + chaos`, the rest.
pub fn generate(seed: u64, start: Timestamp, chaos: TimeDelta) -> Vec<(Timestamp, Request)> {
    let mut rng = SplitMix::new(seed ^ 0xa11c_e5ed);
    let pools: Vec<String> =
        crate::clouds::POOLS[..2 + rng.below(2) as usize].iter().map(|p| (*p).to_owned()).collect();
    let clouds: Vec<&str> = pools.iter().map(|_| CLOUDS[rng.below(CLOUDS.len() as u64) as usize]).collect();
    let mut out: Vec<(Timestamp, Request)> = vec![];
    let mut versions = vec![0u64; pools.len()];
    let mut sizes = vec![0u64; pools.len()];
    for ((p, cloud), size) in pools.iter().zip(&clouds).zip(&mut sizes) {
        let spec = installed(p, cloud, notified(p, spec(&mut rng, 0, cloud)));
        *size = spec["size"].as_u64().unwrap_or_default();
        out.push((start, Request::PutPool { pool: p.clone(), spec }));
    }
    // Claims shared with another principal and changed while held (issue 59) draw from a stream of their own, so
    // that every seed's other requests stay what they were.
    let mut shares = SplitMix::new(seed ^ 0x5ab1_ec75);
    // Claims by labels (issue 59) likewise: some claims name labels instead of their pool.
    let mut by_labels = SplitMix::new(seed ^ 0x1abe_15ed);
    // (pool, claim, owner, subjects) of the claims made.
    let mut claims: Vec<(String, String, String, Vec<String>)> = vec![];
    let mut t = start + TimeDelta::minutes(5);
    let end = start + chaos;
    let mut n = 0;
    while t < end {
        n += 1;
        let p = pools[rng.below(pools.len() as u64) as usize].clone();
        let owner = OWNERS[rng.below(OWNERS.len() as u64) as usize].to_owned();
        let r = rng.unit();
        if rng.chance(0.04) {
            // A CI fan-out: as many claims as the pool has clusters and a few more, at the same instant, racing for
            // its spares (a fan-out much larger than the pool would only queue installs past the quiet bound).
            let i = pools.iter().position(|x| *x == p).unwrap_or_default();
            for k in 0..sizes[i] + 1 + rng.below(3) {
                let claim = format!("c{n}-{k}");
                let owner = OWNERS[rng.below(OWNERS.len() as u64) as usize].to_owned();
                claims.push((p.clone(), claim.clone(), owner.clone(), vec![]));
                out.push((t, Request::Claim { pool: p.clone(), claim, owner, lifetime: None, subjects: vec![] }));
            }
            t += TimeDelta::seconds(30 + rng.below(270) as i64);
            continue;
        }
        let request = if r < 0.45 {
            let claim = format!("c{n}");
            let subjects: Vec<String> = if shares.chance(0.3) { vec![other(&owner, &mut shares)] } else { vec![] };
            // A claim by labels is found by its name alone from then on: its later requests name no pool.
            let labels = (subjects.is_empty() && by_labels.chance(0.25)).then(|| selector(&mut by_labels, &clouds));
            let held_in = if labels.is_some() { String::new() } else { p.clone() };
            claims.push((held_in.clone(), claim.clone(), owner.clone(), subjects.clone()));
            let lifetime = rng.chance(0.3).then(|| "20m".to_owned());
            if lifetime.is_some() && shares.chance(0.5) {
                // Its end moved, later or sooner, by its owner or a subject, within two minutes of when it falls
                // due: the change races the reconcile that ends it.
                let by = actor(&owner, &subjects, &mut shares);
                let at = t + TimeDelta::minutes(20) + TimeDelta::seconds(shares.below(240) as i64 - 120);
                let lifetime = Some(if shares.chance(0.5) { "40m" } else { "5m" }.to_owned());
                let change = Request::Change { pool: held_in, claim: claim.clone(), by, lifetime, subjects: None };
                out.push((at, change));
            }
            match labels {
                Some(labels) => Request::ClaimByLabels { claim, owner, labels, lifetime },
                None => Request::Claim { pool: p, claim, owner, lifetime, subjects },
            }
        } else if r < 0.70 && !claims.is_empty() {
            let (pool, claim, owner, subjects) = claims.swap_remove(rng.below(claims.len() as u64) as usize);
            let owner = actor(&owner, &subjects, &mut shares);
            Request::Release { pool, claim, owner }
        } else if r < 0.82 && !claims.is_empty() {
            let (pool, claim, owner, subjects) = claims[rng.below(claims.len() as u64) as usize].clone();
            if shares.chance(0.2) {
                // Shared anew, or no longer, by whoever tries: only the owner may (or an admin).
                let by = actor(&owner, &subjects, &mut shares);
                let subjects = Some(if shares.chance(0.5) { vec![other(&owner, &mut shares)] } else { vec![] });
                out.push((
                    t,
                    Request::Change { pool: pool.clone(), claim: claim.clone(), by, lifetime: None, subjects },
                ));
            }
            let owner = actor(&owner, &subjects, &mut shares);
            Request::Power { pool, claim, owner, hibernate: rng.chance(0.5) }
        } else if r < 0.985 {
            let i = pools.iter().position(|x| *x == p).unwrap_or_default();
            versions[i] += u64::from(rng.chance(0.3));
            let spec = installed(&p, clouds[i], notified(&p, spec(&mut rng, versions[i], clouds[i])));
            sizes[i] = spec["size"].as_u64().unwrap_or_default();
            Request::PutPool { pool: p, spec }
        } else {
            Request::DeletePool { pool: p }
        };
        out.push((t, request));
        // A request every half a minute to five minutes, some in bursts.
        let gap = if rng.chance(0.2) { rng.below(3) } else { 30 + rng.below(270) };
        t += TimeDelta::seconds(gap as i64);
    }
    out
}
