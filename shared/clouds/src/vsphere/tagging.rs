//! vCenter's tags as Apiary uses them: a cluster's category `openshift-<infraId>` and its tag `<infraId>`, found or
//! made, what each is attached to, and a process-wide cache of their ids.

use super::*;

impl Vsphere {
    /// The tag `<infraId>` of category `openshift-<infraId>`: (category id, tag id), created when `create`.
    pub(super) async fn tag(&self, vc: &Vc<'_>, t: &Target<'_>, create: bool) -> Result<Option<(String, String)>> {
        let infra_id = &t.cluster.infra_id;
        let key = format!("{} tag {infra_id}", vc.root);
        if let Some(both) = self.ids.lock().unwrap_or_else(|e| e.into_inner()).get(&key) {
            if let Some((c, tag)) = both.split_once(' ') {
                return Ok(Some((c.to_owned(), tag.to_owned())));
            }
        }
        let wanted = category_name(infra_id);
        let mut category = self.find_category(vc, &wanted).await?;
        if category.is_none() && create {
            let url = format!("{}/api/cis/tagging/category", vc.root);
            let body = json!({
                "name": wanted,
                "description": category_description(&t.cluster.id, t.pool),
                "cardinality": "SINGLE",
                "associable_types": ["VirtualMachine", "ResourcePool", "Folder", "Datastore", "StoragePod"],
            });
            let answer = self.call("vsphere:category.create", vc, |c| c.post(&url).json(&body)).await?;
            category = match (answer.is_success(), api_error(&answer).0.as_str()) {
                (true, _) => Some(answer.json("vsphere:category.create")?),
                // Made meanwhile by another invocation: find it.
                (false, "ALREADY_EXISTS") => self.find_category(vc, &wanted).await?,
                _ => return Err(Error::service("vsphere:category.create", api_error(&answer).1, false)),
            };
        }
        let Some(category) = category else { return Ok(None) };
        let mut tag = self.find_tag(vc, &category, infra_id).await?;
        if tag.is_none() && create {
            let url = format!("{}/api/cis/tagging/tag", vc.root);
            let body = json!({"name": infra_id, "category_id": category, "description": format!("Apiary cluster {}", t.cluster.id)});
            let answer = self.call("vsphere:tag.create", vc, |c| c.post(&url).json(&body)).await?;
            tag = match (answer.is_success(), api_error(&answer).0.as_str()) {
                (true, _) => Some(answer.json("vsphere:tag.create")?),
                (false, "ALREADY_EXISTS") => self.find_tag(vc, &category, infra_id).await?,
                _ => return Err(Error::service("vsphere:tag.create", api_error(&answer).1, false)),
            };
        }
        let Some(tag) = tag else { return Ok(None) };
        self.ids.lock().unwrap_or_else(|e| e.into_inner()).insert(key, format!("{category} {tag}"));
        Ok(Some((category, tag)))
    }

    /// The id of the category named `name`: the list of ids, each new id's name read once per process.
    pub(super) async fn find_category(&self, vc: &Vc<'_>, name: &str) -> Result<Option<String>> {
        for id in self.category_ids(vc).await? {
            if self.category(vc, &id).await?.is_some_and(|(found, _)| found == name) {
                return Ok(Some(id));
            }
        }
        Ok(None)
    }

    pub(super) async fn category_ids(&self, vc: &Vc<'_>) -> Result<Vec<String>> {
        self.get("vsphere:category.list", vc, &format!("{}/api/cis/tagging/category", vc.root)).await
    }

    /// The name and description of category `id`, read once per process; `None` when it is gone.
    pub(super) async fn category(&self, vc: &Vc<'_>, id: &str) -> Result<Option<(String, String)>> {
        let key = format!("{} {id}", vc.root);
        if let Some(known) = self.categories.lock().unwrap_or_else(|e| e.into_inner()).get(&key).cloned() {
            return Ok(Some(known));
        }
        let url = format!("{}/api/cis/tagging/category/{}", vc.root, escape(id));
        let answer = self.call("vsphere:category.get", vc, |c| c.get(&url)).await?;
        if answer.status == StatusCode::NOT_FOUND {
            return Ok(None);
        }
        if !answer.is_success() {
            return Err(Error::service("vsphere:category.get", api_error(&answer).1, false));
        }
        let c: Value = answer.json("vsphere:category.get")?;
        let field = |f: &str| c[f].as_str().unwrap_or_default().to_owned();
        let both = (field("name"), field("description"));
        self.categories.lock().unwrap_or_else(|e| e.into_inner()).insert(key, both.clone());
        Ok(Some(both))
    }

    pub(super) async fn find_tag(&self, vc: &Vc<'_>, category: &str, name: &str) -> Result<Option<String>> {
        let url = format!("{}/api/cis/tagging/tag?action=list-tags-for-category", vc.root);
        let body = json!({ "category_id": category });
        let answer = self.call("vsphere:tag.list", vc, |c| c.post(&url).json(&body)).await?;
        if answer.status == StatusCode::NOT_FOUND {
            return Ok(None);
        }
        if !answer.is_success() {
            return Err(Error::service("vsphere:tag.list", api_error(&answer).1, false));
        }
        let ids: Vec<String> = answer.json("vsphere:tag.list")?;
        for id in ids {
            let tag: Value =
                self.get("vsphere:tag.get", vc, &format!("{}/api/cis/tagging/tag/{}", vc.root, escape(&id))).await?;
            if tag["name"].as_str() == Some(name) {
                return Ok(Some(id));
            }
        }
        Ok(None)
    }

    /// Ids of the VMs `tag` is attached to.
    pub(super) async fn attached(&self, vc: &Vc<'_>, tag: &str) -> Result<BTreeSet<String>> {
        let url = format!("{}/api/cis/tagging/tag-association/{}?action=list-attached-objects", vc.root, escape(tag));
        let answer = self.call("vsphere:tag.listAttachedObjects", vc, |c| c.post(&url)).await?;
        if answer.status == StatusCode::NOT_FOUND {
            // Deleted meanwhile (by another process, which deprovisioned its cluster): nothing is attached to it.
            self.forget_tag(tag);
            return Ok(BTreeSet::new());
        }
        if !answer.is_success() {
            return Err(Error::service("vsphere:tag.listAttachedObjects", api_error(&answer).1, false));
        }
        let objects: Vec<Value> = answer.json("vsphere:tag.listAttachedObjects")?;
        Ok(objects
            .iter()
            .filter(|o| o["type"] == "VirtualMachine")
            .filter_map(|o| o["id"].as_str().map(str::to_owned))
            .collect())
    }

    /// Forgets the cached ids of the tag `tag` (and its category): it is gone, and is looked up again when needed.
    pub(super) fn forget_tag(&self, tag: &str) {
        let suffix = format!(" {tag}");
        self.ids.lock().unwrap_or_else(|e| e.into_inner()).retain(|_, both| !both.ends_with(&suffix));
    }

    /// The VMs each tag in `tags` is attached to, by tag, with one call; a tag vCenter does not answer for (it is
    /// gone, or not readable) is not there. `None` when vCenter refuses the call as a whole (a tag among them it
    /// will not read, say): each cluster is then looked at alone, where a tag gone is forgotten.
    pub(super) async fn attached_to_each(
        &self,
        vc: &Vc<'_>,
        tags: &[String],
    ) -> Result<Option<BTreeMap<String, Vec<String>>>> {
        let op = "vsphere:tag.listAttachedObjectsOnTags";
        let url = format!("{}/api/cis/tagging/tag-association?action=list-attached-objects-on-tags", vc.root);
        let body = json!({ "tag_ids": tags });
        let answer = self.call(op, vc, |c| c.post(&url).json(&body)).await?;
        if !answer.is_success() {
            tracing::info!(error = %api_error(&answer).1, "vCenter refused the tags' list; looking at each cluster alone");
            return Ok(None);
        }
        let found: Vec<TagToObjects> = answer.json(op)?;
        Ok(Some(
            found
                .into_iter()
                .map(|t| {
                    (t.tag_id, t.object_ids.into_iter().filter(|o| o.kind == "VirtualMachine").map(|o| o.id).collect())
                })
                .collect(),
        ))
    }
}
