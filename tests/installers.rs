//! System tests of pools whose clusters an installer makes: the webhook installer's story, the reference
//! OpenShift installer's, install failures by class, and a release bump (issue 73).

use std::collections::BTreeSet;
use std::time::Duration;

use apiary_planner::condition;
use apiary_ports::secrets::Secrets;
use serde_json::{json, Value};

use crate::support::{self, ADMIN, ALICE};
use crate::MINUTE;

/// An install that fails for a class the pool does not try again (a quota, by default) breaks its cluster at once,
/// and says why in the cluster's condition, the trail, the `cluster.broken` notification and the pool's condition.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_install_failing_for_quota_is_not_tried_again_and_says_so_everywhere() {
    let s = support::clouds_stack().await;
    let clouds = s.clouds.as_ref().expect("a stack with the fake clouds");
    clouds.webhook.fail_attempts(u32::MAX);
    clouds.webhook.fail_saying(Some(
        "level=fatal msg=failed to fetch Cluster: failed to generate asset \"Platform Quota Check\": \
         error(MissingQuota): compute.googleapis.com/cpus is not available in europe-west1 because the required \
         number of resources (24) is more than remaining quota of 8",
    ));
    // The demo secrets are granted to pool w, the name the demo gives this pool.
    let mut spec: Value =
        serde_json::from_str(include_str!("../infra/demo-pool-installer.json")).expect("the demo pool");
    clouds.fill(&mut spec);
    spec["size"] = json!(1);
    spec["runningCount"] = json!(0);
    s.put_pool("w", &spec).await;
    let broken = s
        .until("the cluster broken for its quota", MINUTE, || async {
            let (_, trail) = s.call("GET", "/pools/w/events", ADMIN, None).await;
            trail["events"].as_array().and_then(|e| e.iter().find(|e| e["type"] == "ClusterBroken")).cloned()
        })
        .await;
    let why = broken["message"].as_str().expect("message");
    assert!(
        why.starts_with(
            "QuotaExceeded: an account quota was exceeded, not tried again (installRetryReasons): attempt 1 of"
        ),
        "{why}"
    );
    assert!(why.contains("MissingQuota"), "{why}");
    let id = broken["cluster"].as_str().expect("cluster");
    let attempts: Vec<u32> =
        clouds.webhook.clusters().into_iter().filter(|(c, _, _)| c == id).map(|(_, attempt, _)| attempt).collect();
    assert_eq!(attempts, [1], "one attempt, never a second");
    let heard = s
        .until("the cluster.broken notification", MINUTE, || async {
            let received = clouds.receiver.received();
            received.into_iter().find(|r| r.body["type"] == "cluster.broken" && r.body["data"]["cluster"] == id)
        })
        .await;
    let reason = heard.body["data"]["reason"].as_str().unwrap_or_default();
    assert!(reason.starts_with("QuotaExceeded: an account quota was exceeded"), "{}", heard.body);
    s.until("the pool's condition quoting it", MINUTE, || async {
        let (_, pool) = s.call("GET", "/pools/w", ADMIN, None).await;
        let conditions = pool["status"]["conditions"].as_array().cloned().unwrap_or_default();
        let backoff = conditions.into_iter().find(|c| c["type"] == "ProvisioningBackoff")?;
        backoff["message"].as_str().filter(|m| m.contains("an account quota was exceeded")).map(|_| ())
    })
    .await;
}

/// Issue 73: a pool's release is part of its version. Bumping it replaces the unclaimed clusters, each made again
/// from the new release (its installer asked for it), the trail saying which release each replaced one was made
/// from; the claimed cluster keeps its release until its claim ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_bump_replaces_the_unclaimed_clusters_and_each_shows_the_new_release() {
    let s = support::clouds_stack().await;
    let clouds = s.clouds.as_ref().expect("a stack with the fake clouds");
    let (old, new) = (
        "quay.io/openshift-release-dev/ocp-release:4.18.1-x86_64",
        "quay.io/openshift-release-dev/ocp-release:4.18.2-x86_64",
    );
    // The demo secrets are granted to pool w, the name the demo gives this pool.
    let mut spec: Value =
        serde_json::from_str(include_str!("../infra/demo-pool-installer.json")).expect("the demo pool");
    clouds.fill(&mut spec);
    spec["size"] = json!(3);
    spec["release"] = json!(old);
    s.put_pool("w", &spec).await;
    let before = s.converged("w", 3, 1).await;
    assert!(before.iter().all(|c| c["release"] == old), "{before:?}");
    let (status, claim) = s.call("PUT", "/pools/w/claims/job", ALICE, None).await;
    assert_eq!(status, 201, "{claim}");
    let held = claim["cluster"]["id"].as_str().expect("cluster").to_owned();

    spec["release"] = json!(new);
    s.put_pool("w", &spec).await;
    let deadline = tokio::time::Instant::now() + 3 * MINUTE;
    let after = loop {
        let clusters = s.clusters("w").await;
        let unclaimed: Vec<&Value> = clusters.iter().filter(|c| c["id"] != held.as_str()).collect();
        let made_again = |c: &&Value| c["release"] == new && c["deleting"].is_null() && c["installedAt"].is_string();
        if unclaimed.len() == 3 && unclaimed.iter().all(made_again) {
            break clusters;
        }
        let seen: Vec<String> = clusters
            .iter()
            .map(|c| format!("{} {} {} deleting {}", c["id"], c["release"], c["powerState"], c["deleting"]))
            .collect();
        assert!(
            tokio::time::Instant::now() < deadline,
            "not every unclaimed cluster is of {new}:\n{}",
            seen.join("\n")
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    let kept = after.iter().find(|c| c["id"] == held.as_str()).expect("the claimed cluster stays");
    assert_eq!(kept["release"], old, "a claimed cluster is never replaced for a release");
    for c in after.iter().filter(|c| c["id"] != held.as_str()) {
        let id = c["id"].as_str().expect("id");
        assert_eq!(clouds.webhook.release(id).as_deref(), Some(new), "{id}: its installer was asked for the release");
    }
    let (_, trail) = s.call("GET", "/pools/w/events?limit=200", ADMIN, None).await;
    let replaced = trail["events"]
        .as_array()
        .map(|events| {
            let said = format!("made from release {old}, the pool's is now {new}: to be replaced");
            events.iter().filter(|e| e["type"] == "ClusterDeleting" && e["message"] == said.as_str()).count()
        })
        .unwrap_or_default();
    assert_eq!(replaced, 2, "{trail}");
}

/// The external installer's story through the HTTP API: a GCP pool whose clusters the reference installer makes
/// behind the signed webhook fills with the installer's clusters (its infraIds, its machines), a claim is answered
/// with the cluster's outputs, the pool's GCP actuator hibernates and resumes the installer's machines, and a
/// released cluster is removed through the webhook. The pool's Kubernetes check reads each cluster's API: the
/// kubelets' certificates expire a second after the install, so the resume approves their requests (seed 004),
/// and the hostile requests posted beside them stay pending.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pool_installed_through_the_webhook_hands_out_outputs_powers_its_machines_and_removes_them_through_it() {
    let s = support::clouds_stack().await;
    let clouds = s.clouds.as_ref().expect("a stack with the fake clouds");
    clouds.cluster_api.hostile(&apiary_fakeclouds::kubelets::Hostile::ALL);
    let mut spec: Value =
        serde_json::from_str(include_str!("../infra/demo-pool-installer.json")).expect("the demo pool");
    clouds.fill(&mut spec);
    s.put_pool("w", &spec).await;
    let before = s.converged("w", 2, 1).await;
    let infra_ids: BTreeSet<String> = clouds.webhook.clusters().into_iter().map(|(_, _, infra)| infra).collect();
    let shown: BTreeSet<String> = before.iter().map(|c| c["infraId"].as_str().expect("infraId").to_owned()).collect();
    assert_eq!(shown, infra_ids, "the pool's clusters are the installer's");
    let machines = |c: &Value| {
        let prefix = format!("{}-", c["infraId"].as_str().expect("infraId"));
        let all = clouds.gcp.instances(apiary_local::clouds::DEMO_PROJECT);
        all.into_iter().filter(|(_, n, _)| n.starts_with(&prefix)).map(|(_, _, s)| s).collect::<Vec<_>>()
    };
    let running = before.iter().find(|c| c["powerState"] == "Running").expect("a Running cluster").clone();
    let standby = before.iter().find(|c| c["powerState"] == "Hibernating").expect("a standby cluster").clone();
    assert_eq!(machines(&running), ["RUNNING"; 3]);
    assert_eq!(machines(&standby), ["TERMINATED"; 3], "the pool's GCP actuator stopped the installer's machines");

    let (status, claim) = s.call("PUT", "/pools/w/claims/job", ALICE, None).await;
    assert_eq!(status, 201, "{claim}");
    assert_eq!(claim["cluster"]["id"], running["id"]);
    let name = running["clusterName"].as_str().expect("name");
    let outputs = &claim["cluster"]["outputs"];
    assert_eq!(outputs["apiUrl"], format!("https://api.{name}.demo.example.com:6443"), "{claim}");
    assert!(outputs["kubeconfigSecretArn"].as_str().is_some_and(|a| a.starts_with("arn:aws:secretsmanager:")));
    let addressed = |claim: &Value| -> Vec<(String, bool, bool)> {
        let list = claim["cluster"]["machines"].as_array().cloned().unwrap_or_default();
        let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
        list.iter().map(|m| (text(&m["id"]), m["privateIp"].is_string(), m["publicIp"].is_string())).collect()
    };
    let prefix = running["infraId"].as_str().expect("infraId").to_owned();
    let first = addressed(&claim);
    assert_eq!(first.len(), 3, "the machines, with their addresses: {claim}");
    assert!(first.iter().all(|(id, private, public)| id.starts_with(&prefix) && *private && *public), "{first:?}");

    let (status, body) = s.call("POST", "/pools/w/claims/job/hibernate", ALICE, None).await;
    assert_eq!(status, 202, "{body}");
    s.until("the claimed cluster is stopped", MINUTE, || async {
        (machines(&running) == ["TERMINATED"; 3]).then_some(())
    })
    .await;
    // Asleep past its kubelets' certificates (seed 004): the resume must approve their requests.
    clouds.cluster_api.expire(running["infraId"].as_str().expect("infraId"));
    let (status, body) = s.call("POST", "/pools/w/claims/job/resume", ALICE, None).await;
    assert_eq!(status, 202, "{body}");
    // Seed 004's waiting states: the machines, the nodes, the settle pause, the pool's readiness check; the
    // claim is Ready only once the check passed.
    let seen = std::sync::Mutex::new(Vec::<(String, String)>::new());
    s.until("the claimed cluster runs again", MINUTE, || async {
        let (_, c) = s.call("GET", "/pools/w/claims/job", ALICE, None).await;
        let state = c["cluster"]["powerState"].as_str().unwrap_or_default().to_owned();
        let phase = c["phase"].as_str().unwrap_or_default().to_owned();
        let mut seen = seen.lock().expect("seen");
        if seen.last().is_none_or(|last| *last != (state.clone(), phase.clone())) {
            seen.push((state, phase));
        }
        (c["phase"] == "Ready" && machines(&running) == ["RUNNING"; 3]).then_some(())
    })
    .await;
    let seen = seen.into_inner().expect("seen");
    assert!(seen.iter().any(|(state, _)| state == "PausingForClusterOperatorsToSettle"), "{seen:?}");
    let csrs = clouds.cluster_api.csrs(running["infraId"].as_str().expect("infraId"));
    assert_eq!(csrs.iter().filter(|c| !c.hostile()).count(), 6, "a client and a serving request per node");
    for csr in &csrs {
        assert_eq!(csr.approved(), !csr.hostile(), "{} approved exactly when a kubelet's own", csr.name());
    }
    let cluster = running["id"].as_str().expect("id");
    let (_, trail) = s.call("GET", &format!("/pools/w/events?cluster={cluster}"), ADMIN, None).await;
    let told = |kind: &str| -> Vec<String> {
        let events = trail["events"].as_array().cloned().unwrap_or_default();
        events.iter().filter(|e| e["type"] == kind).map(|e| e["message"].as_str().unwrap_or_default().into()).collect()
    };
    let approved = told("NodeCertificatesApproved").join(" ");
    assert_eq!(approved.matches("certificate)").count(), 6, "{trail}");
    let pending = told("NodeCertificatesLeftPending").join(" ");
    assert!(pending.contains("not the node bootstrapper") && pending.contains("is not the requester"), "{trail}");
    // Two hours older than the resume on the cluster's clock, which runs on Apiary's: left pending for that alone
    // ("made at …, before this resume began at …", cut short in the trail's message).
    assert!(pending.contains(": made at 20"), "{trail}");
    let running_told = told("ClusterRunning");
    assert!(running_told[0].ends_with("6 node certificate requests approved"), "{running_told:?}");
    let (_, resumed) = s.call("GET", "/pools/w/claims/job", ALICE, None).await;
    assert_eq!(addressed(&resumed).len(), 3, "the resume found the machines' addresses again: {resumed}");
    for (state, phase) in &seen {
        assert_eq!(phase == "Ready", state == "Running", "Ready exactly when Running: {seen:?}");
    }

    // Nothing secret in an API answer, the table or the metrics: neither the installer's signing key nor the
    // GCP service account's private key, which the power function read to make every call above.
    let secrets = apiary_aws::secrets::SecretsManager::new(&apiary_aws::config::load_sdk_config().await);
    let key = secrets.secret(&clouds.webhook_secret).await.expect("the signing key");
    let account = secrets.secret(&clouds.gcp_credentials).await.expect("the service account");
    let account: Value = serde_json::from_str(account.expose()).expect("a key file");
    let private = account["private_key"].as_str().expect("private_key");
    let pem_body: String = private.lines().filter(|l| !l.starts_with("-----")).collect();
    let needles = [key.expose().trim_start_matches("whsec_").to_owned(), pem_body[40..120].to_owned()];
    let mut seen = vec![claim.to_string()];
    for path in ["/pools/w", "/pools/w/clusters", "/pools/w/claims", "/pools/w/claims/job"] {
        seen.push(s.call("GET", path, ADMIN, None).await.1.to_string());
    }
    let table = s.deps.store.read_pool("w").await.expect("read").expect("the pool");
    seen.push(serde_json::to_string(&table).expect("json"));
    seen.push(s.metrics().iter().map(Value::to_string).collect());
    for text in &seen {
        for needle in &needles {
            assert!(!text.contains(needle.as_str()), "a secret leaked into: {}", &text[..text.len().min(300)]);
        }
    }

    let (status, body) = s.call("DELETE", "/pools/w/claims/job", ALICE, None).await;
    assert_eq!(status, 202, "{body}");
    let gone = running["infraId"].as_str().expect("infraId").to_owned();
    s.until("the released cluster is removed through the webhook", MINUTE, || async {
        let held = clouds.webhook.clusters().iter().any(|(_, _, infra)| *infra == gone);
        let listed = s.clusters("w").await.iter().any(|c| c["id"] == running["id"]);
        (!held && !listed && machines(&running).is_empty()).then_some(())
    })
    .await;
    s.stop().await;
}

/// The reference OpenShift installer's story (issue 61's done-when): a pool whose clusters `apiary-installer`
/// installs from an install-config template and inventory parameters, with `fake-openshift-install` as its jobs,
/// fills with clusters whose machines the stand-in launched in EC2; the Kubernetes check passes through the
/// kubeconfig each install wrote; a claim gets a Running one with its outputs; its release destroys it (machines,
/// secrets, the installer's record). Its extra manifest reached each install. A pool whose template does not fit openshift-install's schema gets a
/// ProvisionFailed condition naming the field.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_openshift_pool_installs_through_the_reference_installer_and_a_release_destroys_the_cluster() {
    use apiary_aws::sdk_ec2::types::Filter;
    let standin = apiary_local::openshift::program();
    assert!(
        standin.exists(),
        "{} is not built: cargo build -p apiary-installer --bin fake-openshift-install (make test builds it)",
        standin.display()
    );
    let s = support::clouds_stack().await;
    let clouds = s.clouds.as_ref().expect("a stack with the fake clouds");
    let mut spec: Value =
        serde_json::from_str(include_str!("../infra/demo-pool-openshift.json")).expect("the demo pool");
    clouds.fill(&mut spec);
    s.put_pool("w", &spec).await;
    let before = s.converged("w", 2, 1).await;
    let instances = |infra: String| {
        let ec2 = s.ec2.clone();
        async move {
            let tag = Filter::builder().name(format!("tag:kubernetes.io/cluster/{infra}")).values("owned").build();
            let out = ec2.describe_instances().filters(tag).send().await.expect("describe");
            let states: Vec<String> = out
                .reservations()
                .iter()
                .flat_map(|r| r.instances())
                .filter_map(|i| i.state().and_then(|s| s.name()).map(|n| n.as_str().to_owned()))
                .filter(|n| n != "terminated")
                .collect();
            states
        }
    };
    let running = before.iter().find(|c| c["powerState"] == "Running").expect("a Running cluster").clone();
    let standby = before.iter().find(|c| c["powerState"] == "Hibernating").expect("a standby cluster").clone();
    let infra = |c: &Value| c["infraId"].as_str().expect("infraId").to_owned();
    // Three control-plane machines and the workers its inventory entry's parameters asked for.
    let workers = |c: &Value| {
        let entries = spec["inventory"]["clusterDeployments"].as_array().cloned().unwrap_or_default();
        let entry = entries.iter().find(|e| e["name"] == c["clusterName"]).expect("an inventory entry").clone();
        entry["parameters"]["workers"].as_str().and_then(|w| w.parse::<usize>().ok()).expect("workers")
    };
    assert_eq!(instances(infra(&running)).await, vec!["running"; 3 + workers(&running)]);
    assert_eq!(instances(infra(&standby)).await, vec!["stopped"; 3 + workers(&standby)]);
    // Tagged for the pool, as the stack's power role requires of what it starts and stops.
    let tagged = Filter::builder().name("tag:apiary:pool").values("w").build();
    let out = s.ec2.describe_instances().filters(tagged).send().await.expect("describe");
    let count: usize = out.reservations().iter().map(|r| r.instances().len()).sum();
    assert_eq!(count, 6 + workers(&running) + workers(&standby));

    // The demo's extra manifest went into openshift/ and was consumed by the install, rendered for the cluster.
    let dir = clouds.openshift.root.join("clusters").join(running["id"].as_str().expect("id"));
    let state = std::fs::read(dir.join(".openshift_install_state.json")).expect("openshift-install's state");
    let state: Value = serde_json::from_slice(&state).expect("its state is JSON");
    let consumed = state["*manifests.Openshift"]["FileList"].to_string();
    assert!(consumed.contains("openshift/99_apiary-00-configmap-apiary-pool.yaml"), "{consumed}");

    let (status, claim) = s.call("PUT", "/pools/w/claims/job", ALICE, None).await;
    assert_eq!(status, 201, "{claim}");
    assert_eq!(claim["cluster"]["id"], running["id"]);
    let outputs = &claim["cluster"]["outputs"];
    assert_eq!(outputs["apiUrl"], clouds.cluster_api.server(&infra(&running)), "{claim}");
    let name = running["clusterName"].as_str().expect("name");
    assert_eq!(outputs["consoleUrl"], format!("https://console-openshift-console.apps.{name}.demo.example.com"));
    let kubeconfig = outputs["kubeconfigSecretArn"].as_str().expect("the kubeconfig's ARN").to_owned();
    let secrets = apiary_aws::secrets::SecretsManager::new(&apiary_aws::config::load_sdk_config().await);
    let tags = secrets.tags(&kubeconfig).await.expect("the kubeconfig's tags");
    assert_eq!(tags.get("apiary:pools").map(String::as_str), Some("w"), "tagged for the pool: {tags:?}");
    // The claimant reads its cluster's credentials through the claim API (its role reads them), not Secrets Manager.
    let (status, body) = s.call("GET", "/pools/w/claims/job/credentials", ALICE, None).await;
    assert_eq!(status, 200, "{body}");
    let given = body["credentials"]["kubeconfig"].as_str().expect("the kubeconfig");
    assert_eq!(given, secrets.secret(&kubeconfig).await.expect("the kubeconfig").expose());
    let password = body["credentials"]["kubeadminPassword"].as_str().unwrap_or_default();
    assert!(password.starts_with("apiary-canary-kubeadmin-password-"), "{body}");

    let (status, body) = s.call("DELETE", "/pools/w/claims/job", ALICE, None).await;
    assert_eq!(status, 202, "{body}");
    let id = running["id"].as_str().expect("id").to_owned();
    let record = clouds.openshift.root.join("records").join(format!("{id}.json"));
    // The installer keeps the record as the removal's tombstone, so that a late install request cannot bring the
    // cluster back.
    let removed = || {
        let read = std::fs::read(&record).ok().and_then(|b| serde_json::from_slice::<Value>(&b).ok());
        read.is_some_and(|r| r["phase"] == "Removed")
    };
    s.until("the released cluster is destroyed by the installer", MINUTE * 2, || async {
        let listed = s.clusters("w").await.iter().any(|c| c["id"] == running["id"]);
        (!listed && removed() && instances(infra(&running)).await.is_empty()).then_some(())
    })
    .await;
    assert!(secrets.secret(&kubeconfig).await.is_err(), "the kubeconfig's secret is removed");

    // A template openshift-install would refuse: the pool's cluster fails to provision, naming the field.
    let settings_of = apiary_installer::local::LocalPools::new(&clouds.openshift.root);
    use apiary_installer::ports::Pools;
    let settings = settings_of.settings("w").await.expect("read").expect("the demo settings");
    settings_of.put("p", &settings).await.expect("settings");
    let bad = apiary_local::openshift::TEMPLATE.replace("    region: us-east-1", "    regoin: us-east-1");
    settings_of.put_template("demo-aws-typo", &bad).await.expect("a template");
    let mut refused = spec.clone();
    refused["size"] = json!(1);
    refused["runningCount"] = json!(0);
    refused["installConfigTemplate"] = json!("demo-aws-typo");
    s.put_pool("p", &refused).await;
    let message = s
        .until("the refused template is told on the cluster", MINUTE, || async {
            let clusters = s.clusters("p").await;
            let conditions = clusters.first()?["conditions"].as_array()?.clone();
            let failed =
                conditions.iter().find(|c| c["type"] == condition::PROVISION_FAILED && c["status"] == "True")?;
            failed["message"].as_str().map(str::to_owned)
        })
        .await;
    assert!(message.contains("platform.aws.regoin: is not a field"), "{message}");
    assert!(message.contains("platform.aws.region: is required"), "{message}");
    s.stop().await;
}

/// Issue 73: an OpenShift pool off AWS, as `make run`'s demo-openshift-gcp. The reference installer renders the GCP
/// template the pool names, its jobs install with the pool's service account key, the stand-in makes the machines on
/// the fake Compute Engine labelled for the cluster, the pool's GCP platform powers them (its standby stopped, its
/// spare Running), and a claim gets the Running one; its release removes the machines with the same key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_openshift_pool_on_gcp_installs_through_the_reference_installer_with_the_pools_key() {
    let s = support::clouds_stack().await;
    let clouds = s.clouds.as_ref().expect("a stack with the fake clouds");
    let mut spec: Value =
        serde_json::from_str(include_str!("../infra/demo-pool-openshift-gcp.json")).expect("the demo pool");
    clouds.fill(&mut spec);
    spec["size"] = json!(2);
    s.put_pool("w", &spec).await;
    let before = s.converged("w", 2, 1).await;
    let machines = |c: &Value| {
        let label = apiary_clouds::gcp::cluster_label(c["infraId"].as_str().expect("infraId"));
        clouds.gcp.labelled(apiary_local::clouds::DEMO_PROJECT, &label, "owned")
    };
    let running = before.iter().find(|c| c["powerState"] == "Running").expect("a Running cluster").clone();
    let standby = before.iter().find(|c| c["powerState"] == "Hibernating").expect("a standby cluster").clone();
    assert_eq!(machines(&running), ["RUNNING"; 5], "three control-plane machines and two workers");
    assert_eq!(machines(&standby), ["TERMINATED"; 5], "the pool's GCP platform stopped the installer's machines");
    assert!(before.iter().all(|c| c["release"] == spec["release"]), "{before:?}");

    let (status, claim) = s.call("PUT", "/pools/w/claims/job", ALICE, None).await;
    assert_eq!(status, 201, "{claim}");
    assert_eq!(claim["cluster"]["id"], running["id"]);
    assert_eq!(
        claim["cluster"]["outputs"]["apiUrl"],
        clouds.cluster_api.server(running["infraId"].as_str().unwrap_or(""))
    );
    let (status, _) = s.call("DELETE", "/pools/w/claims/job", ALICE, None).await;
    assert_eq!(status, 202);
    s.until("the released cluster's machines are deleted with the pool's key", 2 * MINUTE, || async {
        machines(&running).iter().all(|m| m == "STOPPING").then_some(())
    })
    .await;
    // The key was the jobs' only while they ran: once the pool is full again and no job runs, nothing of it is
    // left beside the installer's directories.
    s.converged("w", 2, 1).await;
    let left = std::fs::read_dir(clouds.openshift.root.join("credentials")).map(|d| d.count()).unwrap_or(0);
    assert_eq!(left, 0);
    s.stop().await;
}
