//! A node's labels as the cache keeps them: sorted (key, value) handles into one pool of
//! shared strings, decoded straight from the watch's text.
//!
//! Most keys and values repeat on every node (zone, OS, architecture, instance type,
//! kubelet version), so a node with 20 labels holds 640 bytes of handles and its few
//! unique values (its hostname) instead of 40 owned strings in a map.

use std::fmt;
use std::sync::{Arc, LazyLock};

use serde::de::{MapAccess, Visitor};
use serde::{Deserialize, Deserializer};

use crate::intern::Pool;
use crate::selector::Labels;

static LABEL_STRINGS: LazyLock<Pool> = LazyLock::new(Pool::new);

/// A node's labels, sorted by key, each key and value shared with every other node that
/// has it: twenty labels cost twenty pairs of handles plus the node's few unique values
/// (its hostname), where a map of owned strings holds a copy of every key and value per
/// node.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct NodeLabels(pub(super) Box<[(Arc<str>, Arc<str>)]>);

impl NodeLabels {
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.0.iter().map(|(k, v)| (&**k, &**v))
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl Labels for NodeLabels {
    fn label(&self, key: &str) -> Option<&str> {
        let i = self.0.binary_search_by(|(k, _)| (**k).cmp(key)).ok()?;
        Some(&self.0[i].1)
    }
}

impl fmt::Debug for NodeLabels {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl<'a> FromIterator<(&'a str, &'a str)> for NodeLabels {
    fn from_iter<I: IntoIterator<Item = (&'a str, &'a str)>>(pairs: I) -> Self {
        let mut labels: Vec<(Arc<str>, Arc<str>)> = pairs
            .into_iter()
            .map(|(k, v)| (LABEL_STRINGS.intern(k), LABEL_STRINGS.intern(v)))
            .collect();
        // A JSON object with a repeated key keeps the last value, as Go's decoder does.
        labels.reverse();
        labels.sort_by(|a, b| a.0.cmp(&b.0));
        labels.dedup_by(|later, first| later.0 == first.0);
        NodeLabels(labels.into_boxed_slice())
    }
}

/// Decodes `metadata.labels` straight into shared strings, borrowing from the input where
/// it can: no owned copy of a label is made only to be dropped again.
impl<'de> Deserialize<'de> for NodeLabels {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct LabelsVisitor;
        impl<'de> Visitor<'de> for LabelsVisitor {
            type Value = NodeLabels;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a map of label keys to values")
            }
            fn visit_unit<E>(self) -> Result<NodeLabels, E> {
                Ok(NodeLabels::default())
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<NodeLabels, A::Error> {
                let mut pairs: Vec<(Text<'de>, Text<'de>)> = Vec::new();
                while let Some(pair) = map.next_entry()? {
                    pairs.push(pair);
                }
                Ok(pairs
                    .iter()
                    .map(|(k, v)| (k.as_str(), v.as_str()))
                    .collect())
            }
        }
        deserializer.deserialize_map(LabelsVisitor)
    }
}

/// A string from the input: borrowed when the input has it unescaped, else owned.
enum Text<'de> {
    Borrowed(&'de str),
    Owned(String),
}

impl Text<'_> {
    fn as_str(&self) -> &str {
        match self {
            Text::Borrowed(s) => s,
            Text::Owned(s) => s,
        }
    }
}

impl<'de> Deserialize<'de> for Text<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct TextVisitor;
        impl<'de> Visitor<'de> for TextVisitor {
            type Value = Text<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E>(self, s: &'de str) -> Result<Text<'de>, E> {
                Ok(Text::Borrowed(s))
            }
            fn visit_str<E>(self, s: &str) -> Result<Text<'de>, E> {
                Ok(Text::Owned(s.to_owned()))
            }
            fn visit_string<E>(self, s: String) -> Result<Text<'de>, E> {
                Ok(Text::Owned(s))
            }
        }
        deserializer.deserialize_str(TextVisitor)
    }
}
