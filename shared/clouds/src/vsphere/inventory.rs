//! vCenter's inventory as a pool reads it: datacenters, folders, templates and datastores looked up by name, a
//! cluster's VMs listed (by folder, by tag, by id), their power changed and their VMware Tools read.

use super::*;

impl Vsphere {
    /// The id of the inventory object `kind` named `name` (in the datacenter `within`), looked up once. With
    /// `remember_none`, that there is none is remembered too (openshift-install's `<infraId>` folder: a cluster
    /// that has none never gets one).
    pub(super) async fn lookup(
        &self,
        vc: &Vc<'_>,
        kind: &'static str,
        name: &str,
        within: Option<&str>,
        remember_none: bool,
    ) -> Result<Option<String>> {
        let key = format!("{} {kind} {} {name}", vc.root, within.unwrap_or_default());
        if let Some(id) = self.ids.lock().unwrap_or_else(|e| e.into_inner()).get(&key) {
            return Ok((!id.is_empty()).then(|| id.clone()));
        }
        let mut url = format!("{}/api/vcenter/{kind}?names={}", vc.root, escape(name));
        if let Some(dc) = within {
            url.push_str(&format!("&datacenters={}", escape(dc)));
        }
        if kind == "folder" {
            url.push_str("&type=VIRTUAL_MACHINE");
        }
        let found: Vec<Value> = self.get(op_of(kind), vc, &url).await?;
        let field = if kind == "resource-pool" { "resource_pool" } else { kind };
        let id = found.first().and_then(|o| o[field].as_str()).map(str::to_owned);
        if id.is_some() || remember_none {
            self.ids.lock().unwrap_or_else(|e| e.into_inner()).insert(key, id.clone().unwrap_or_default());
        }
        Ok(id)
    }

    pub(super) async fn datacenter(&self, vc: &Vc<'_>) -> Result<String> {
        self.lookup(vc, "datacenter", &vc.vs.datacenter, None, false).await?.ok_or_else(|| {
            Error::service(
                "vsphere:datacenter.list",
                format!("no datacenter {:?} on {}", vc.vs.datacenter, vc.vs.server),
                false,
            )
        })
    }

    /// VMs by the list's filters (`names`, `folders`, `vms`).
    pub(super) async fn list(&self, vc: &Vc<'_>, filters: &[(&str, String)]) -> Result<Vec<Vm>> {
        let url = format!("{}/api/vcenter/vm", vc.root);
        let answer = self.call("vsphere:vm.list", vc, |c| c.get(&url).query(filters)).await?;
        if !answer.is_success() {
            return Err(Error::service("vsphere:vm.list", api_error(&answer).1, false));
        }
        answer.json("vsphere:vm.list")
    }

    /// The cluster's VMs: those in the folder `<infraId>` and those carrying its tag, by name.
    pub(super) async fn members(&self, vc: &Vc<'_>, t: &Target<'_>) -> Result<Vec<Vm>> {
        let dc = self.datacenter(vc).await?;
        let mut found: BTreeMap<String, Vm> = BTreeMap::new();
        if let Some(folder) = self.lookup(vc, "folder", &t.cluster.infra_id, Some(&dc), true).await? {
            for vm in self.list(vc, &[("folders", folder)]).await? {
                found.insert(vm.vm.clone(), vm);
            }
        }
        if let Some((_, tag)) = self.tag(vc, t, false).await? {
            let ids: Vec<(&str, String)> = self
                .attached(vc, &tag)
                .await?
                .into_iter()
                .filter(|id| !found.contains_key(id))
                .map(|id| ("vms", id))
                .collect();
            if !ids.is_empty() {
                for vm in self.list(vc, &ids).await? {
                    found.insert(vm.vm.clone(), vm);
                }
            }
        }
        let mut vms: Vec<Vm> = found.into_values().collect();
        vms.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(vms)
    }

    /// The VMs of the ids `vms`, [`LIST_IDS`] to a list.
    pub(super) async fn listed(&self, vc: &Vc<'_>, vms: &[String]) -> Result<Vec<Vm>> {
        let mut found = Vec::new();
        for ids in vms.chunks(LIST_IDS) {
            let filters: Vec<(&str, String)> = ids.iter().map(|id| ("vms", id.clone())).collect();
            found.extend(self.list(vc, &filters).await?);
        }
        Ok(found)
    }

    /// A power call on each VM: `(vm, path under /api/vcenter/vm/{vm}, op)`.
    pub(super) async fn power(&self, vc: &Vc<'_>, calls: Vec<(Vm, &'static str, &'static str)>) -> Result<Refused> {
        let calls: Vec<(String, (String, &'static str))> = calls
            .into_iter()
            .map(|(vm, path, op)| {
                (vm.name.clone(), (format!("{}/api/vcenter/vm/{}/{path}", vc.root, escape(&vm.vm)), op))
            })
            .collect();
        fanout::each(calls, |(url, op)| async move {
            let answer = self.call(op, vc, |c| c.post(&url)).await?;
            if answer.is_success() || answer.status == StatusCode::NOT_FOUND {
                return Ok(Outcome::Done);
            }
            let (kind, message) = api_error(&answer);
            Ok(match kind.as_str() {
                // Done already, or not yet possible (a guest shutdown under way): the next look asks again.
                "ALREADY_IN_DESIRED_STATE" | "NOT_ALLOWED_IN_CURRENT_STATE" | "RESOURCE_BUSY" => Outcome::Done,
                _ => Outcome::Refused(message),
            })
        })
        .await
    }

    /// Whether VMware Tools runs in each VM, in order.
    pub(super) async fn tools(&self, vc: &Vc<'_>, vms: &[Vm]) -> Result<Vec<bool>> {
        fanout::all(vms.to_vec(), |vm| async move {
            let url = format!("{}/api/vcenter/vm/{}/tools", vc.root, escape(&vm.vm));
            let tools: Value = self.get("vsphere:vm.tools.get", vc, &url).await?;
            Ok(tools["run_state"] == "RUNNING")
        })
        .await
    }

    /// The pool's folder, looked up in its datacenter.
    pub(super) async fn folder(&self, vc: &Vc<'_>, dc: &str) -> Result<Option<String>> {
        self.lookup(vc, "folder", &vc.vs.folder, Some(dc), false).await
    }
}
