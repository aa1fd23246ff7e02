//! Installing and removing a cluster on vSphere: clones of the pool's template, tagged and powered on, followed by
//! their tasks (the provisioning handle); removal powers off and deletes every VM, then the tag and its category.

use super::*;

impl Vsphere {
    /// The cluster's own VMs in the pool's folder (`<infraId>-<n>`), by machine number.
    pub(super) async fn own(&self, vc: &Vc<'_>, t: &Target<'_>, folder: &str) -> Result<BTreeMap<usize, Vm>> {
        let count = usize::try_from(vc.vs.machine_count).unwrap_or(1).max(1);
        let names: BTreeMap<String, usize> = (0..count).map(|n| (vm_name(&t.cluster.infra_id, n), n)).collect();
        let mut filters: Vec<(&str, String)> = names.keys().map(|n| ("names", n.clone())).collect();
        filters.push(("folders", folder.to_owned()));
        Ok(self.list(vc, &filters).await?.into_iter().filter_map(|vm| names.get(&vm.name).map(|n| (*n, vm))).collect())
    }

    /// How many of the clone tasks of `handle` are still running (a task vCenter has forgotten is not).
    pub(super) async fn clones_running(&self, vc: &Vc<'_>, handle: Option<&str>) -> Result<u32> {
        let mut running = 0;
        for (_, task) in tasks_of(handle) {
            let url = format!("{}/api/cis/tasks/{}", vc.root, escape(&task));
            let answer = self.call("vsphere:task.get", vc, |c| c.get(&url)).await?;
            if !answer.is_success() {
                continue;
            }
            let info: Value = answer.json("vsphere:task.get")?;
            if matches!(info["status"].as_str(), Some("PENDING" | "RUNNING" | "BLOCKED")) {
                running += 1;
            }
        }
        Ok(running)
    }
}

#[async_trait]
impl Provisioner for Vsphere {
    async fn install_state(&self, t: Target<'_>) -> Result<Install> {
        let vs = Self::platform(t.pool, t.spec)?;
        let vc = self.vc(vs)?;
        let dc = self.datacenter(&vc).await?;
        let Some(folder) = self.folder(&vc, &dc).await? else { return Ok(Install::Absent) };
        let own = self.own(&vc, &t, &folder).await?;
        let mut under_way = false;
        for (n, task) in tasks_of(t.cluster.provision_ref.as_deref()) {
            if own.contains_key(&n) {
                continue;
            }
            let url = format!("{}/api/cis/tasks/{}", vc.root, escape(&task));
            let answer = self.call("vsphere:task.get", &vc, |c| c.get(&url)).await?;
            if answer.status == StatusCode::NOT_FOUND {
                // Forgotten by vCenter: what is missing is made again.
                continue;
            }
            let info: Value = answer.json("vsphere:task.get")?;
            match info["status"].as_str().unwrap_or_default() {
                "FAILED" => {
                    let why = info["error"]["messages"][0]["default_message"].as_str().unwrap_or("the clone failed");
                    return Ok(Install::Failed {
                        message: format!("clone of {}: {why}", vm_name(&t.cluster.infra_id, n)),
                    });
                }
                _ => under_way = true,
            }
        }
        let count = usize::try_from(vs.machine_count).unwrap_or(1).max(1);
        if under_way {
            return Ok(Install::UnderWay);
        }
        if own.len() < count {
            return Ok(Install::Absent);
        }
        let Some((_, tag)) = self.tag(&vc, &t, false).await? else { return Ok(Install::Absent) };
        let tagged = self.attached(&vc, &tag).await?;
        let ready = own.values().all(|vm| tagged.contains(&vm.vm) && vm.state() == MachineState::Running);
        // Untagged or off: the next provisioning call tags them and powers them on.
        Ok(if ready { Install::Done } else { Install::Absent })
    }

    async fn provision(&self, t: Target<'_>) -> Result<Provision> {
        let vs = Self::platform(t.pool, t.spec)?;
        let vc = self.vc(vs)?;
        let dc = self.datacenter(&vc).await?;
        let missing = |what: &str, name: &str| {
            Ok(Provision::Refused(format!("no {what} {name:?} in datacenter {}", vs.datacenter)))
        };
        let Some(folder) = self.folder(&vc, &dc).await? else { return missing("VM folder", &vs.folder) };
        let Some(template) = self.lookup(&vc, "vm", &vs.template, Some(&dc), false).await? else {
            return missing("template VM", &vs.template);
        };
        let mut placement = json!({ "folder": folder });
        for (kind, field, name) in
            [("resource-pool", "resource_pool", &vs.resource_pool), ("datastore", "datastore", &vs.datastore)]
        {
            if let Some(name) = name {
                let Some(id) = self.lookup(&vc, kind, name, Some(&dc), false).await? else {
                    return missing(kind, name);
                };
                placement[field] = json!(id);
            }
        }
        let (_, tag) = self
            .tag(&vc, &t, true)
            .await?
            .ok_or_else(|| Error::service("vsphere:tag.create", "the tag was not made", true))?;
        let own = self.own(&vc, &t, &folder).await?;
        let count = usize::try_from(vs.machine_count).unwrap_or(1).max(1);
        let url = format!("{}/api/vcenter/vm?action=clone&vmw-task=true", vc.root);
        let mut tasks = vec![];
        for n in (0..count).filter(|n| !own.contains_key(n)) {
            let body = json!({"name": vm_name(&t.cluster.infra_id, n), "source": template, "placement": placement, "power_on": true});
            let answer = self.call("vsphere:vm.clone", &vc, |c| c.post(&url).json(&body)).await?;
            if answer.is_success() {
                tasks.push((n, answer.json::<String>("vsphere:vm.clone")?));
                continue;
            }
            let (kind, message) = api_error(&answer);
            if kind != "ALREADY_EXISTS" {
                return Ok(Provision::Refused(format!("clone of {}: {message}", vm_name(&t.cluster.infra_id, n))));
            }
        }
        // Clones made earlier: tagged as the cluster's and powered on.
        if !own.is_empty() {
            let url = format!(
                "{}/api/cis/tagging/tag-association/{}?action=attach-tag-to-multiple-objects",
                vc.root,
                escape(&tag)
            );
            let objects: Vec<Value> = own.values().map(|vm| json!({"type": "VirtualMachine", "id": vm.vm})).collect();
            let body = json!({ "object_ids": objects });
            let answer = self.call("vsphere:tag.attach", &vc, |c| c.post(&url).json(&body)).await?;
            if answer.status == StatusCode::NOT_FOUND {
                // The tag was deleted meanwhile: the next provisioning call makes it again.
                self.forget_tag(&tag);
            }
            if !answer.is_success() {
                return Ok(Provision::Refused(format!("tagging the clones: {}", api_error(&answer).1)));
            }
            let off = own
                .into_values()
                .filter(|vm| vm.state().start_acts())
                .map(|vm| (vm, "power?action=start", "vsphere:vm.power.start"))
                .collect();
            if let Err(why) = self.power(&vc, off).await?.into_result() {
                return Ok(Provision::Refused(why));
            }
        }
        Ok(Provision::Accepted { handle: handle_of(&tasks) })
    }

    async fn deprovision(&self, t: Target<'_>) -> Result<Termination> {
        let vc = self.vc(Self::platform(t.pool, t.spec)?)?;
        // Clones still running become VMs later: wait for them rather than call the cluster gone; and for those
        // a provisioning call whose outcome was never recorded may have started. Asked before the VMs are listed:
        // a clone that finishes between the two looks is then listed, never missed by both.
        let unknown =
            t.cluster.pending_call.is_some_and(|p| p.call == ActuatorCall::Provision && t.now < p.at + CLONE_GRACE);
        let running = self.clones_running(&vc, t.cluster.provision_ref.as_deref()).await? + u32::from(unknown);
        let mut vms = self.members(&vc, &t).await?;
        // Its own clones in the pool's folder, tagged or not yet (the tag comes with a later provisioning call),
        // however many the pool asked for when they were made.
        let dc = self.datacenter(&vc).await?;
        if let Some(folder) = self.folder(&vc, &dc).await? {
            let prefix = format!("{}-", t.cluster.infra_id);
            for vm in self.list(&vc, &[("folders", folder)]).await? {
                let own = vm
                    .name
                    .strip_prefix(&prefix)
                    .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
                if own && !vms.iter().any(|m| m.vm == vm.vm) {
                    vms.push(vm);
                }
            }
        }
        let on: Vec<(Vm, &str, &str)> = vms
            .iter()
            .filter(|vm| vm.state() == MachineState::Running)
            .map(|vm| (vm.clone(), "power?action=stop", "vsphere:vm.power.stop"))
            .collect();
        let mut refused = self.power(&vc, on).await?;
        let deletions: Vec<(String, String)> = vms
            .iter()
            .filter(|vm| !refused.machines.iter().any(|(name, _)| name == &vm.name))
            .map(|vm| (vm.name.clone(), format!("{}/api/vcenter/vm/{}", vc.root, escape(&vm.vm))))
            .collect();
        let vc_ref = &vc;
        let deleted = fanout::each(deletions, |url| async move {
            let answer = self.call("vsphere:vm.delete", vc_ref, |c| c.delete(&url)).await?;
            Ok(if answer.is_success() || answer.status == StatusCode::NOT_FOUND {
                Outcome::Done
            } else {
                Outcome::Refused(api_error(&answer).1)
            })
        })
        .await?;
        refused.machines.extend(deleted.machines);
        refused.machines.sort();
        let remaining = refused.machines.len() as u32 + running;
        if remaining > 0 {
            return Ok(Termination { remaining, refused: refused.machines });
        }
        // No VM left (a VM's deletion is done when vCenter answers it): the tag and its category go too, and a
        // category left with no tag (a provisioning call that died between making the two) as well.
        let category = match self.tag(&vc, &t, false).await? {
            Some((category, _)) => Some(category),
            None => self.find_category(&vc, &category_name(&t.cluster.infra_id)).await?,
        };
        if let Some(category) = category {
            let url = format!("{}/api/cis/tagging/category/{}", vc.root, escape(&category));
            let answer = self.call("vsphere:category.delete", &vc, |c| c.delete(&url)).await?;
            self.ids
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(&format!("{} tag {}", vc.root, t.cluster.infra_id));
            if !(answer.is_success() || answer.status == StatusCode::NOT_FOUND) {
                let why = format!("{}: {}", category_name(&t.cluster.infra_id), api_error(&answer).1);
                return Ok(Termination { remaining: 0, refused: vec![("tag category".into(), why)] });
            }
        }
        Ok(Termination { remaining: 0, refused: vec![] })
    }

    /// The tag categories Apiary made for the pool's clusters (`openshift-<infraId>`, its description naming the
    /// pool): one list of the categories, each new one read once per process. A cluster's VMs are found through
    /// its category (its tag, and its clones in the pool's folder) when the orphan is deprovisioned; the category
    /// is deleted only once no clone of it is left or still running, so it outlives every VM it stands for.
    async fn marked(&self, pool: &str, spec: &PoolSpec, _now: Timestamp) -> Result<Option<Vec<Marked>>> {
        let vc = self.vc(Self::platform(pool, spec)?)?;
        let prefix = category_name("");
        let mut marked = vec![];
        for id in self.category_ids(&vc).await? {
            let Some((name, description)) = self.category(&vc, &id).await? else { continue };
            if pool_of(&description) != Some(pool) {
                continue;
            }
            if let Some(infra_id) = name.strip_prefix(&prefix).filter(|i| !i.is_empty()) {
                marked.push(Marked { infra_id: infra_id.to_owned(), machine: name.clone() });
            }
        }
        Ok(Some(marked))
    }
}

/// A provisioning handle: `n=task` for each clone started, comma-separated.
pub(super) fn handle_of(tasks: &[(usize, String)]) -> Option<String> {
    (!tasks.is_empty()).then(|| tasks.iter().map(|(n, task)| format!("{n}={task}")).collect::<Vec<_>>().join(","))
}

pub(super) fn tasks_of(handle: Option<&str>) -> Vec<(usize, String)> {
    handle
        .into_iter()
        .flat_map(|h| h.split(','))
        .filter_map(|pair| pair.split_once('=').and_then(|(n, task)| Some((n.parse().ok()?, task.to_owned()))))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_handle_lists_the_clone_tasks_by_machine() {
        let h = handle_of(&[(0, "task-1".into()), (2, "task-3".into())]);
        assert_eq!(h.as_deref(), Some("0=task-1,2=task-3"));
        assert_eq!(tasks_of(h.as_deref()), [(0, "task-1".to_owned()), (2, "task-3".to_owned())]);
        assert_eq!(handle_of(&[]), None);
        assert!(tasks_of(Some("garbage")).is_empty());
    }
}
