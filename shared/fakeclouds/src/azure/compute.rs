//! Virtual machines and their network resources: listed in pages with their instance views, read, and started,
//! deallocated and powered off through ARM's power states on the fake's clock.

use super::*;

/// The id of network resource `name` of `kind` in group `rg`.
pub(super) fn network_id(sub: &str, rg: &str, kind: &str, name: &str) -> String {
    format!("/subscriptions/{sub}/resourceGroups/{rg}/providers/Microsoft.Network/{kind}/{name}")
}

pub(super) fn capitalized(text: &str) -> String {
    let mut c = text.chars();
    c.next().map(|f| f.to_uppercase().chain(c).collect()).unwrap_or_default()
}

pub(super) fn vm_not_found(name: &str) -> Response {
    error(
        404,
        "ResourceNotFound",
        &format!("The Resource 'Microsoft.Compute/virtualMachines/{name}' under resource group was not found."),
    )
}
pub(super) fn list_vms(s: &State, sub: &str, rg: &str, req: &Request) -> Response {
    let Some(group) = s.groups.get(&rg_key(sub, rg)) else {
        return group_not_found(rg);
    };
    // `$expand=instanceView` puts each VM's instance view in its `properties`, as ARM's list does.
    let expand = req.param("$expand").filter(|e| e.eq_ignore_ascii_case("instanceView"));
    let all: Vec<&Vm> =
        s.vms.iter().filter(|((su, r, _), _)| (su.as_str(), r.as_str()) == (sub, rg)).map(|(_, v)| v).collect();
    let from: usize = req.param("$skiptoken").and_then(|t| t.parse().ok()).unwrap_or(0);
    let page: Vec<Value> = all
        .iter()
        .skip(from)
        .take(s.page_size)
        .map(|v| {
            let mut vm = s.vm_json(sub, &group.name, v);
            if expand.is_some() {
                vm["properties"]["instanceView"] = instance_view(v);
            }
            vm
        })
        .collect();
    let mut body = json!({"value": page});
    if from + s.page_size < all.len() {
        body["nextLink"] = json!(format!(
            "{}/subscriptions/{sub}/resourceGroups/{}/providers/Microsoft.Compute/virtualMachines?api-version={}{}&$skiptoken={}",
            s.base,
            group.name,
            req.param(API_VERSION).unwrap_or_default(),
            expand.map(|e| format!("&$expand={e}")).unwrap_or_default(),
            from + s.page_size
        ));
    }
    Response::json(200, &body)
}

pub(super) fn instance_view(vm: &Vm) -> Value {
    let provisioning = match &vm.failure {
        Some(message) => {
            json!({"code": format!("ProvisioningState/{}", vm.provisioning), "level": "Error", "displayStatus": "Provisioning failed", "message": message})
        }
        None => {
            json!({"code": format!("ProvisioningState/{}", vm.provisioning), "level": "Info", "displayStatus": format!("Provisioning {}", vm.provisioning)})
        }
    };
    let display = match vm.power {
        "running" => "VM running",
        "deallocated" => "VM deallocated",
        "stopped" => "VM stopped",
        "starting" => "VM starting",
        "stopping" => "VM stopping",
        _ => "VM deallocating",
    };
    let agent = if vm.power == "running" { "Ready" } else { "Not Ready" };
    json!({
        "computerName": vm.name,
        "osName": "redhat",
        "vmAgent": {"vmAgentVersion": "2.11.1", "statuses": [{"code": "ProvisioningState/succeeded", "level": "Info", "displayStatus": agent}]},
        "statuses": [provisioning, {"code": format!("PowerState/{}", vm.power), "level": "Info", "displayStatus": display}],
    })
}

pub(super) fn vm_action(s: &mut State, sub: &str, rg: &str, name: &str, verb: &str) -> Response {
    let k = key(sub, rg, name);
    let Some(vm) = s.vms.get(&k).cloned() else {
        return vm_not_found(name);
    };
    let action = match verb {
        "start" => "start",
        "deallocate" => "deallocate",
        "poweroff" => "powerOff",
        _ => return error(404, "NotFound", &format!("no action {verb}")),
    };
    if s.refusing.contains(&vm.name) {
        return error(
            403,
            "AuthorizationFailed",
            &format!("The client does not have authorization to perform action 'Microsoft.Compute/virtualMachines/{action}/action' over scope '/subscriptions/{sub}/resourceGroups/{rg}/providers/Microsoft.Compute/virtualMachines/{}'.", vm.name),
        );
    }
    let conflict = || {
        error(
            409,
            "Conflict",
            &format!("Operation '{action}' is not allowed on VM '{}' since another operation is in progress.", vm.name),
        )
    };
    if vm.provisioning == "deleting" {
        return conflict();
    }
    let Timings { boot, stop, .. } = s.timings;
    let mut failed = None;
    let done_after = match (action, vm.power) {
        ("start", "deallocated" | "stopped") => {
            if s.no_capacity.contains(&vm.name) {
                failed = Some(
                    json!({"code": "AllocationFailed", "message": "Allocation failed. We do not have sufficient capacity for the requested VM size in this region."}),
                );
                s.transition(&k, "starting", boot, Next::NoCapacity);
            } else {
                s.transition(&k, "starting", boot, Next::Power("running"));
            }
            boot
        }
        ("start", "running" | "starting") => Duration::ZERO,
        ("deallocate", _) if vm.ephemeral_os_disk => {
            return error(
                409,
                "OperationNotAllowed",
                "Operation 'deallocate' is not supported for VMs or VM Scale Set instances using an ephemeral OS disk.",
            );
        }
        ("deallocate", "running" | "stopped") => {
            s.transition(&k, "deallocating", stop, Next::Power("deallocated"));
            stop
        }
        ("deallocate", "deallocated" | "deallocating") => Duration::ZERO,
        ("powerOff", "running") => {
            s.transition(&k, "stopping", stop, Next::Power("stopped"));
            stop
        }
        ("powerOff", "stopped" | "stopping" | "deallocated") => Duration::ZERO,
        _ => return conflict(),
    };
    let done_at = s.now() + done_after;
    let op = s.operation(Operation::Vm { done_at, failed });
    let location = vm.location.clone();
    let async_op = format!(
        "{}/subscriptions/{sub}/providers/Microsoft.Compute/locations/{location}/operations/{op}?api-version=2024-07-01",
        s.base
    );
    Response { status: 202, headers: vec![], body: vec![] }
        .header("azure-asyncoperation", &async_op)
        .header("location", &format!("{async_op}&monitor=true"))
        .header("retry-after", &done_after.as_secs().clamp(1, 10).to_string())
}

impl State {
    pub(super) fn new_vm(
        &mut self,
        name: &str,
        location: &str,
        tags: Value,
        ephemeral: bool,
        power: &'static str,
    ) -> Vm {
        Vm {
            name: name.to_owned(),
            location: location.to_owned(),
            tags,
            power,
            provisioning: "succeeded".into(),
            failure: None,
            next: None,
            ephemeral_os_disk: ephemeral,
            vm_id: self.id(),
        }
    }

    /// Ends every transition, deletion and deployment whose time has come.
    pub(super) fn settle(&mut self) {
        let now = self.now();
        for vm in self.vms.values_mut() {
            let Some((at, next)) = vm.next else { continue };
            if at > now || self.stuck.contains(&vm.name) {
                continue;
            }
            vm.next = None;
            match next {
                Next::Power(p) => {
                    vm.power = p;
                    vm.provisioning = "succeeded".into();
                    vm.failure = None;
                }
                Next::NoCapacity => {
                    vm.power = "deallocated";
                    vm.provisioning = "failed/AllocationFailed".into();
                    vm.failure = Some(
                        "Allocation failed. We do not have sufficient capacity for the requested VM size in this \
                         region."
                            .into(),
                    );
                }
            }
        }
        let gone: Vec<RgKey> = self
            .groups
            .iter()
            .filter(|(_, rg)| rg.deleting.as_ref().is_some_and(|(at, _)| *at <= now))
            .map(|(k, _)| k.clone())
            .collect();
        for g in gone {
            self.groups.remove(&g);
            self.vms.retain(|(s, r, _), _| (s, r) != (&g.0, &g.1));
            self.deployments.retain(|(s, r, _), _| (s, r) != (&g.0, &g.1));
        }
    }

    /// Starts a VM transition: now in `power`, ending in `next` after `after` (provisioning `updating`).
    pub(super) fn transition(&mut self, k: &Key, power: &'static str, after: Duration, next: Next) {
        let at = self.now() + after;
        if let Some(vm) = self.vms.get_mut(k) {
            vm.power = power;
            vm.provisioning = "updating".into();
            vm.failure = None;
            vm.next = Some((at, next));
        }
    }

    pub(super) fn vm_json(&self, sub: &str, rg: &str, vm: &Vm) -> Value {
        let mut os_disk =
            json!({"osType": "Linux", "name": format!("{}_OsDisk", vm.name), "createOption": "FromImage"});
        if vm.ephemeral_os_disk {
            os_disk["diffDiskSettings"] = json!({"option": "Local", "placement": "CacheDisk"});
        }
        let provisioning = match vm.provisioning.as_str() {
            p if p.starts_with("failed") => "Failed".to_owned(),
            p => capitalized(p),
        };
        json!({
            "id": format!("/subscriptions/{sub}/resourceGroups/{rg}/providers/Microsoft.Compute/virtualMachines/{}", vm.name),
            "name": vm.name,
            "type": "Microsoft.Compute/virtualMachines",
            "location": vm.location,
            "tags": vm.tags,
            "properties": {
                "vmId": vm.vm_id,
                "hardwareProfile": {"vmSize": "Standard_D4s_v5"},
                "storageProfile": {"osDisk": os_disk},
                "networkProfile": {"networkInterfaces": [
                    {"id": network_id(sub, rg, "networkInterfaces", &format!("{}-nic", vm.name)), "properties": {"primary": true}},
                ]},
                "provisioningState": provisioning,
            },
        })
    }

    /// The network interfaces (`kind` "networkInterfaces") or public IP addresses ("publicIPAddresses") of the
    /// group's VMs: each VM has one of each; its private address is fixed, its public one allocated (dynamic)
    /// only while it runs.
    pub(super) fn network_json(&self, sub: &str, rg: &str, kind: &str) -> Value {
        let value: Vec<Value> = self
            .vms
            .iter()
            .filter(|((su, r, _), _)| (su.as_str(), r.as_str()) == (sub, rg.to_ascii_lowercase().as_str()))
            .map(|(_, vm)| {
                let n = vm.name.bytes().fold(0u16, |h, b| h.wrapping_mul(31).wrapping_add(u16::from(b)));
                let [hi, lo] = n.to_be_bytes();
                let pip = network_id(sub, rg, "publicIPAddresses", &format!("{}-pip", vm.name));
                if kind == "networkInterfaces" {
                    json!({"id": network_id(sub, rg, kind, &format!("{}-nic", vm.name)), "name": format!("{}-nic", vm.name),
                           "properties": {"ipConfigurations": [{"name": "ipconfig1", "properties": {
                               "primary": true, "privateIPAddress": format!("10.1.{hi}.{}", lo.max(4)),
                               "privateIPAllocationMethod": "Dynamic", "publicIPAddress": {"id": pip}}}]}})
                } else {
                    let mut properties = json!({"publicIPAllocationMethod": "Dynamic"});
                    if vm.power == "running" {
                        properties["ipAddress"] = json!(format!("192.0.2.{}", lo.max(1)));
                    }
                    json!({"id": pip, "name": format!("{}-pip", vm.name), "properties": properties})
                }
            })
            .collect();
        json!({"value": value})
    }
}
