//! Manifests as `kubectl apply --server-side` treats them: YAML documents read into
//! dynamic objects, then applied with strict field validation, so that a misspelt field
//! fails a test instead of being dropped silently. For the deploy tests (kustomize base,
//! admission policy, Helm output).

use std::path::Path;

use anyhow::{Context, Result};
use kube::api::{
    Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, ValidationDirective,
};

/// Every document of a multi-document YAML text; empty documents (`---` alone, as Helm
/// leaves between templates) are skipped.
pub fn parse(text: &str) -> Result<Vec<DynamicObject>> {
    let documents: Vec<Option<DynamicObject>> =
        serde_saphyr::from_multiple(text).context("parsing YAML manifests")?;
    Ok(documents.into_iter().flatten().collect())
}

/// [`parse`] of the file at `path`.
pub fn read(path: &Path) -> Result<Vec<DynamicObject>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    parse(&text).with_context(|| format!("in {}", path.display()))
}

/// How [`apply`] applies.
#[derive(Clone, Debug)]
pub struct ApplyOptions<'a> {
    pub field_manager: &'a str,
    /// Validate and admit, but store nothing (`--dry-run=server`).
    pub dry_run: bool,
    /// Where a namespaced object without a namespace goes (Helm leaves it out: the
    /// release's). `None`: such an object is applied cluster-wide and refused.
    pub default_namespace: Option<&'a str>,
}

/// Server-side apply of `obj` (forced, strict field validation); the object as stored.
pub async fn apply(
    client: &kube::Client,
    obj: &DynamicObject,
    options: &ApplyOptions<'_>,
) -> Result<DynamicObject> {
    let types = obj
        .types
        .as_ref()
        .context("a manifest without apiVersion and kind")?;
    let gvk = GroupVersionKind::try_from(types).context("an invalid apiVersion")?;
    let resource = ApiResource::from_gvk(&gvk);
    let namespace = obj.metadata.namespace.as_deref().or(options
        .default_namespace
        .filter(|_| is_namespaced(&types.kind)));
    let api: Api<DynamicObject> = match namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
        None => Api::all_with(client.clone(), &resource),
    };
    let name = obj
        .metadata
        .name
        .as_deref()
        .context("a manifest without a name")?;
    let mut params = PatchParams::apply(options.field_manager).force();
    params.field_validation = Some(ValidationDirective::Strict);
    params.dry_run = options.dry_run;
    api.patch(name, &params, &Patch::Apply(obj))
        .await
        .with_context(|| format!("the API server refused {} {name}", types.kind))
}

/// Whether objects of `kind` live in a namespace, for the kinds kumaco's manifests hold.
fn is_namespaced(kind: &str) -> bool {
    !matches!(
        kind,
        "Namespace"
            | "ClusterRole"
            | "ClusterRoleBinding"
            | "ValidatingAdmissionPolicy"
            | "ValidatingAdmissionPolicyBinding"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_document_and_skips_empty_ones() {
        let text = "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\n---\n\
                    apiVersion: v1\nkind: Namespace\nmetadata: {name: b}\n";
        let objects = parse(text).unwrap();
        let kinds: Vec<&str> = objects
            .iter()
            .map(|o| o.types.as_ref().unwrap().kind.as_str())
            .collect();
        assert_eq!(kinds, ["ConfigMap", "Namespace"]);
    }
}
