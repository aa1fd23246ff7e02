//! vCenter's VMs: listed and filtered, cloned from a template through a task, powered on and off (and shut down
//! through their guest), their VMware Tools and guest identity read, and deleted.

use super::*;

/// A call on the VMs: listed, cloned (and the clone's task), powered, their tools and guest read, deleted.
pub(super) fn route(s: &mut State, req: &Request, parts: &[&str], action: &str) -> Response {
    let vms_named = |s: &State, id: &str| s.vms.get(id).map(|vm| vm.name.clone()).unwrap_or_default();
    match (req.method.as_str(), parts) {
        ("GET", ["api", "vcenter", "vm"]) => list_vms(s, req),
        ("POST", ["api", "vcenter", "vm"]) if action == "clone" => clone(s, req),
        ("GET", ["api", "cis", "tasks", task]) => get_task(s, task),
        ("POST", ["api", "vcenter", "vm", vm, "power"]) => {
            if s.refusing.contains(&vms_named(s, vm)) {
                return unauthorized(vm);
            }
            power(s, vm, action)
        }
        ("POST", ["api", "vcenter", "vm", vm, "guest", "power"]) => {
            if s.refusing.contains(&vms_named(s, vm)) {
                return unauthorized(vm);
            }
            shutdown(s, vm, action)
        }
        ("GET", ["api", "vcenter", "vm", vm, "tools"]) => match s.vms.get(*vm) {
            Some(v) => {
                let state = if s.tools_running(v) { "RUNNING" } else { "NOT_RUNNING" };
                Response::json(
                    200,
                    &json!({"run_state": state, "version_status": "CURRENT", "install_type": "OPEN_VM_TOOLS",
                            "auto_update_supported": false, "upgrade_policy": "MANUAL"}),
                )
            }
            None => not_found(&format!("Virtual machine '{vm}'")),
        },
        // The guest's identity, from its VMware Tools: unavailable until they run. The address derives from the
        // VM's id.
        ("GET", ["api", "vcenter", "vm", vm, "guest", "identity"]) => match s.vms.get(*vm) {
            Some(v) if s.tools_running(v) => {
                let n: u16 = vm.trim_start_matches("vm-").parse().unwrap_or_default();
                let [hi, lo] = n.to_be_bytes();
                Response::json(
                    200,
                    // `name` is the guest OS (an enumeration), as RHCOS reports itself; `host_name` the VM's.
                    &json!({"name": "RHEL_9_64", "family": "LINUX", "host_name": v.name,
                            "full_name": {"default_message": "Red Hat Enterprise Linux CoreOS", "id": "rhcos", "args": []},
                            "ip_address": format!("10.20.{hi}.{}", lo.max(1))}),
                )
            }
            Some(_) => Response::json(
                503,
                &json!({"error_type": "SERVICE_UNAVAILABLE", "messages": [{"id": "com.vmware.api.vcenter.vm.guest.tools_not_running", "default_message": "VMware Tools is not running.", "args": []}]}),
            ),
            None => not_found(&format!("Virtual machine '{vm}'")),
        },
        ("GET", ["api", "vcenter", "vm", vm, "power"]) => match s.vms.get(*vm) {
            Some(v) => Response::json(200, &json!({"state": v.power})),
            None => not_found(&format!("Virtual machine '{vm}'")),
        },
        ("DELETE", ["api", "vcenter", "vm", vm]) => {
            if s.refusing.contains(&vms_named(s, vm)) {
                return unauthorized(vm);
            }
            match s.vms.get(*vm) {
                None => not_found(&format!("Virtual machine '{vm}'")),
                Some(v) if v.power == "POWERED_ON" => error(
                    400,
                    "NOT_ALLOWED_IN_CURRENT_STATE",
                    "The attempted operation cannot be performed in the current state (Powered on).",
                ),
                Some(_) => {
                    s.vms.remove(*vm);
                    for t in s.tags.values_mut() {
                        t.attached.remove(*vm);
                    }
                    Response { status: 204, headers: vec![], body: vec![] }
                }
            }
        }
        _ => no_route(req),
    }
}

pub(super) fn unauthorized(vm: &str) -> Response {
    error(403, "UNAUTHORIZED", &format!("Permission to perform this operation was denied on virtual machine '{vm}'."))
}

pub(super) fn list_vms(s: &State, req: &Request) -> Response {
    let all = |k: &str| req.query.iter().filter(|(q, _)| q == k).map(|(_, v)| v.as_str()).collect::<Vec<_>>();
    let (names, folders, ids) = (all("names"), all("folders"), all("vms"));
    let list: Vec<Value> = s
        .vms
        .iter()
        // Templates are found by name or id only.
        .filter(|(_, vm)| !vm.template || !names.is_empty() || !ids.is_empty())
        .filter(|(id, vm)| {
            (names.is_empty() || names.contains(&vm.name.as_str()))
                && (folders.is_empty() || folders.contains(&vm.folder.as_str()))
                && (ids.is_empty() || ids.contains(&id.as_str()))
        })
        .map(|(id, vm)| json!({"vm": id, "name": vm.name, "power_state": vm.power, "cpu_count": 4, "memory_size_MiB": 16384}))
        .collect();
    Response::json(200, &Value::Array(list))
}

pub(super) fn clone(s: &mut State, req: &Request) -> Response {
    if req.param("vmw-task") != Some("true") {
        return error(400, "INVALID_ARGUMENT", "this fake clones as a task only (vmw-task=true)");
    }
    let body = req.json();
    let name = body["name"].as_str().unwrap_or_default().to_owned();
    let source = body["source"].as_str().unwrap_or_default();
    let folder = body["placement"]["folder"].as_str().unwrap_or_default().to_owned();
    if !s.vms.contains_key(source) {
        return not_found(&format!("Virtual machine '{source}'"));
    }
    if !s.folders.contains_key(&folder) {
        return not_found(&format!("Folder '{folder}'"));
    }
    for (field, known) in [("resource_pool", &s.pools), ("datastore", &s.datastores)] {
        if let Some(id) = body["placement"][field].as_str() {
            if !known.contains_key(id) {
                return not_found(&format!("{field} '{id}'"));
            }
        }
    }
    if name.is_empty() {
        return error(400, "INVALID_ARGUMENT", "name is required");
    }
    let exists = s.vms.values().any(|vm| vm.name == name && vm.folder == folder);
    if exists {
        return error(400, "ALREADY_EXISTS", &format!("The name '{name}' already exists."));
    }
    let now = s.now();
    let task = Task {
        started: now,
        done_at: now + s.timings.clone,
        name,
        folder,
        power_on: body["power_on"].as_bool().unwrap_or(false),
        failure: s.failing_clones.clone(),
        result: None,
    };
    let id = s.id("52a9-clone-task-");
    s.tasks.insert(id.clone(), task);
    Response::json(200, &json!(id))
}

pub(super) fn get_task(s: &State, id: &str) -> Response {
    let Some(t) = s.tasks.get(id) else { return not_found(&format!("Task '{id}'")) };
    let clone = s.timings.clone.as_millis().max(1);
    let elapsed = s.now().saturating_sub(t.started).as_millis().min(clone);
    // The task's Info as its status requires: progress and start time once running, end time once done.
    let mut body = json!({
        "description": {"id": "com.vmware.vcenter.VM.clone", "default_message": "Clone virtual machine", "args": []},
        "service": "com.vmware.vcenter.VM",
        "operation": "clone",
        "cancelable": false,
        "start_time": vapi_time(t.started),
        "progress": {"total": 100, "completed": elapsed * 100 / clone,
                     "message": {"id": "vcenter.vm.clone.progress", "default_message": "Cloning", "args": []}},
    });
    match (&t.result, &t.failure) {
        (Some(vm), _) => {
            body["status"] = json!("SUCCEEDED");
            body["result"] = json!(vm);
            body["end_time"] = json!(vapi_time(t.done_at));
        }
        (None, Some(message)) if s.now() >= t.done_at => {
            body["status"] = json!("FAILED");
            body["end_time"] = json!(vapi_time(t.done_at));
            body["error"] = json!({"error_type": "RESOURCE_INACCESSIBLE", "messages": [{"id": "vcenter.vm.clone.failed", "default_message": message, "args": []}]});
        }
        _ => body["status"] = json!("RUNNING"),
    }
    Response::json(200, &body)
}

/// A time on the fake's clock as the API writes a DateTime (UTC, milliseconds), its start at 2026-01-01.
pub(super) fn vapi_time(at: Duration) -> String {
    let start = chrono::DateTime::from_timestamp(1_767_225_600, 0).unwrap_or_default();
    let when = start + chrono::TimeDelta::from_std(at).unwrap_or_default();
    when.format("%Y-%m-%dT%H:%M:%S%.3fZ").to_string()
}

pub(super) fn power(s: &mut State, vm: &str, action: &str) -> Response {
    let now = s.now();
    let Some(v) = s.vms.get_mut(vm) else { return not_found(&format!("Virtual machine '{vm}'")) };
    let desired =
        || error(400, "ALREADY_IN_DESIRED_STATE", "The virtual machine is already in the desired power state.");
    match (action, v.power) {
        ("start", "POWERED_ON") | ("stop", "POWERED_OFF") => return desired(),
        ("start", _) => {
            v.power = "POWERED_ON";
            v.on_since = now;
        }
        ("stop", _) => {
            v.power = "POWERED_OFF";
            v.shutting_down = None;
        }
        _ => return error(400, "INVALID_ARGUMENT", &format!("unknown action {action}")),
    }
    Response { status: 204, headers: vec![], body: vec![] }
}

pub(super) fn shutdown(s: &mut State, vm: &str, action: &str) -> Response {
    if action != "shutdown" {
        return error(400, "INVALID_ARGUMENT", &format!("unknown action {action}"));
    }
    let Some(v) = s.vms.get(vm).cloned() else { return not_found(&format!("Virtual machine '{vm}'")) };
    if v.power != "POWERED_ON" {
        return error(400, "NOT_ALLOWED_IN_CURRENT_STATE", "The virtual machine is not powered on.");
    }
    if v.shutting_down.is_some() {
        return error(400, "NOT_ALLOWED_IN_CURRENT_STATE", "A guest shutdown is already under way.");
    }
    if !s.tools_running(&v) {
        return error(503, "SERVICE_UNAVAILABLE", "VMware Tools is not running in the guest.");
    }
    if !s.deaf_guests.contains(&v.name) {
        let at = s.now() + s.timings.shutdown;
        if let Some(v) = s.vms.get_mut(vm) {
            v.shutting_down = Some(at);
        }
    }
    Response { status: 204, headers: vec![], body: vec![] }
}
