//! The nodes the tools read: their names and labels, from a manifest file or the API
//! server's answer, and the whole of what kumaco's controller reads of one
//! ([`slim`]), for `plan`, `status` and `uninstall`.

use std::collections::BTreeMap;
use std::path::Path;

use k8s_openapi::api::core::v1::Node;

use super::ToolError;
use crate::node::{Names, SlimNode};
use crate::selector::Selector;

/// A node as the tools see it: only its name and labels matter.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListedNode {
    pub name: String,
    pub labels: BTreeMap<String, String>,
}

/// The nodes `node_selector` selects, sorted by name.
pub fn in_scope(nodes: &[ListedNode], node_selector: &Selector) -> Vec<ListedNode> {
    let mut out: Vec<ListedNode> = nodes
        .iter()
        .filter(|n| node_selector.matches(&n.labels))
        .cloned()
        .collect();
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

/// The Nodes in a NodeList or multi-document file, YAML or JSON, whole.
pub fn read_file(path: &Path) -> Result<Vec<Node>, ToolError> {
    let mut nodes = Vec::new();
    for doc in super::read_documents(path)? {
        if doc.kind() != "Node" {
            continue;
        }
        let node: Node =
            serde_json::from_value(doc.object.clone()).map_err(|e| ToolError::Manifest {
                path: doc.source.clone(),
                message: format!("{}: not a valid Node: {e}", doc.object_ref()),
            })?;
        nodes.push(node);
    }
    Ok(nodes)
}

/// A Node from the API, as the tools see it.
pub fn from_api(node: Node) -> ListedNode {
    ListedNode {
        name: node.metadata.name.unwrap_or_default(),
        labels: node.metadata.labels.unwrap_or_default(),
    }
}

/// A Node as kumaco's controller decodes it: its conditions under kumaco's names (read
/// with `names`), its availability and boot ID, the ownership of its status from
/// managedFields.
pub fn slim(node: &Node, names: &Names) -> SlimNode {
    let mut slim: SlimNode = serde_json::to_value(node)
        .and_then(serde_json::from_value)
        .unwrap_or_default();
    slim.rename(names);
    slim
}
