//! Template deployments: created from a template (inline or linked), evaluated into VMs, followed to an end
//! through their `Azure-AsyncOperation`; and the operations ARM's 202 answers name.

use super::template::evaluate;
use super::*;

pub(super) fn deployment_state(d: &Deployment, now: Duration) -> &'static str {
    match (now >= d.done_at, &d.error) {
        (false, _) => "Running",
        (true, None) => "Succeeded",
        (true, Some(_)) => "Failed",
    }
}

pub(super) fn put_deployment(s: &mut State, sub: &str, rg: &str, name: &str, req: &Request) -> Response {
    let Some(group) = s.groups.get(&rg_key(sub, rg)).cloned() else {
        return group_not_found(rg);
    };
    if group.deleting.is_some() {
        return error(409, "ResourceGroupBeingDeleted", "The resource group is being deleted.");
    }
    let k = key(sub, rg, name);
    let now = s.now();
    if s.deployments.get(&k).is_some_and(|d| deployment_state(d, now) == "Running") {
        return error(409, "DeploymentActive", &format!("The deployment '{name}' is already in progress."));
    }
    let body = req.json();
    let props = &body["properties"];
    let mode = props["mode"].as_str().unwrap_or_default().to_owned();
    if mode != "Incremental" && mode != "Complete" {
        return error(400, "InvalidDeployment", "The deployment mode must be Incremental or Complete.");
    }
    let template = match (&props["template"], props["templateLink"]["uri"].as_str()) {
        (Value::Object(_), None) => props["template"].clone(),
        (Value::Null, Some(uri)) => match s.links.get(uri) {
            Some(t) => t.clone(),
            None => {
                return error(
                    400,
                    "InvalidContentLink",
                    &format!("Unable to download deployment content from '{uri}'."),
                )
            }
        },
        _ => return error(400, "InvalidRequestContent", "The request content must give template or templateLink."),
    };
    let vms = match evaluate(&template, &props["parameters"]) {
        Ok(vms) => vms,
        Err(message) => {
            return error(400, "InvalidTemplate", &format!("Deployment template validation failed: '{message}'."))
        }
    };
    let failure = s.failing_deployments.clone();
    let (boot, deploy) = (s.timings.boot, s.timings.deploy);
    let count = vms.len();
    for (i, (vm_name, location, tags, ephemeral)) in vms.into_iter().enumerate() {
        // A failing deployment gets all but its last VM, as a quota met half way leaves it.
        if failure.is_some() && i + 1 == count {
            break;
        }
        let vk = key(sub, rg, &vm_name);
        if s.vms.contains_key(&vk) {
            continue;
        }
        let location = location.unwrap_or_else(|| group.location.clone());
        let mut vm = s.new_vm(&vm_name, &location, tags, ephemeral, "starting");
        vm.provisioning = "creating".into();
        vm.next = Some((now + boot.min(deploy), Next::Power("running")));
        s.vms.insert(vk, vm);
    }
    let error = failure.map(|(code, message)| {
        json!({
            "code": "DeploymentFailed",
            "message": "At least one resource deployment operation failed. Please list deployment operations for details. Please see https://aka.ms/arm-deployment-operations for usage details.",
            "details": [{"code": code, "message": message}],
        })
    });
    s.deployments.insert(k.clone(), Deployment { name: name.to_owned(), done_at: now + deploy, error, mode });
    let op = s.operation(Operation::Deployment(k));
    let async_op = format!(
        "{}/subscriptions/{sub}/resourcegroups/{rg}/providers/Microsoft.Resources/deployments/{name}/operationStatuses/{op}?api-version=2021-04-01",
        s.base
    );
    Response::json(201, &deployment_json(sub, rg, s.deployments.get(&key(sub, rg, name)), now, "Accepted"))
        .header("azure-asyncoperation", &async_op)
}

pub(super) fn deployment_json(sub: &str, rg: &str, d: Option<&Deployment>, now: Duration, state: &str) -> Value {
    let Some(d) = d else { return Value::Null };
    let state = if state.is_empty() { deployment_state(d, now) } else { state };
    let mut props =
        json!({"provisioningState": state, "mode": d.mode, "correlationId": "00000000-0000-0000-0000-000000000000"});
    if state == "Failed" {
        props["error"] = d.error.clone().unwrap_or_default();
    }
    json!({
        "id": format!("/subscriptions/{sub}/resourceGroups/{rg}/providers/Microsoft.Resources/deployments/{}", d.name),
        "name": d.name,
        "type": "Microsoft.Resources/deployments",
        "properties": props,
    })
}

pub(super) fn get_deployment(s: &State, sub: &str, rg: &str, name: &str) -> Response {
    if !s.groups.contains_key(&rg_key(sub, rg)) {
        return group_not_found(rg);
    }
    match s.deployments.get(&key(sub, rg, name)) {
        Some(d) => Response::json(200, &deployment_json(sub, rg, Some(d), s.now(), "")),
        None => error(404, "DeploymentNotFound", &format!("Deployment '{name}' could not be found.")),
    }
}

pub(super) fn operation_status(s: &State, op: &str) -> Response {
    let now = s.now();
    let (status, error) = match s.operations.get(op) {
        None => return error(404, "NotFound", "operation not found"),
        Some(Operation::Deployment(k)) => match s.deployments.get(k) {
            None => ("Canceled", None),
            Some(d) => match deployment_state(d, now) {
                "Running" => ("InProgress", None),
                "Succeeded" => ("Succeeded", None),
                _ => ("Failed", d.error.clone()),
            },
        },
        Some(Operation::RgDeletion(k)) => (if s.groups.contains_key(k) { "InProgress" } else { "Succeeded" }, None),
        Some(Operation::Vm { done_at, failed }) => match (now >= *done_at, failed) {
            (false, _) => ("InProgress", None),
            (true, None) => ("Succeeded", None),
            (true, Some(e)) => ("Failed", Some(e.clone())),
        },
    };
    let mut body = json!({"name": op, "status": status});
    if let Some(e) = error {
        body["error"] = e;
    }
    Response::json(200, &body)
}
