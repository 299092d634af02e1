//! Label keys and values as apimachinery validates them
//! (`k8s.io/apimachinery/pkg/api/validate/content`: `IsLabelKey`, `IsLabelValue`), for
//! both forms of a selector.

/// What a label value must be, as the errors say it.
pub(super) const VALUE_RULE: &str = "a label value must be 63 characters or less, and consist of \
     alphanumerics, '-', '_' or '.', starting and ending with an alphanumeric";

/// What is wrong with a qualified name (a label key, a condition type kumaco writes), or
/// `None` when it is valid.
pub fn qualified_name_problem(name: &str) -> Option<String> {
    label_key_problem(name)
}

/// What is wrong with a label key, or `None` when it is valid. A key is an optional
/// DNS-subdomain prefix and `/`, then a name of 1 to 63 characters.
pub(super) fn label_key_problem(key: &str) -> Option<String> {
    let mut parts = key.split('/');
    let (prefix, name) = match (parts.next(), parts.next(), parts.next()) {
        (Some(name), None, _) => (None, name),
        (Some(prefix), Some(name), None) => (Some(prefix), name),
        _ => {
            return Some(
                "a label key has at most one '/', between an optional DNS subdomain \
                 prefix and the name, like example.com/name"
                    .into(),
            );
        }
    };
    if let Some(prefix) = prefix {
        if prefix.is_empty() {
            return Some(
                "the prefix before '/' is empty: expected a DNS subdomain like example.com".into(),
            );
        }
        if prefix.len() > 253 {
            return Some(format!(
                "the prefix before '/' must be 253 characters or less (this one has {})",
                prefix.len()
            ));
        }
        if !is_dns_subdomain(prefix) {
            return Some(
                "the prefix before '/' must be a lowercase DNS subdomain: lowercase \
                 alphanumerics, '-' and '.', starting and ending with an alphanumeric, like \
                 example.com"
                    .into(),
            );
        }
    }
    let rule = "a label name must be 1 to 63 characters, and consist of alphanumerics, '-', \
                '_' or '.', starting and ending with an alphanumeric";
    if name.is_empty() {
        return Some(format!("the name is empty: {rule}"));
    }
    if name.len() > 63 {
        return Some(format!("{rule} (this one has {})", name.len()));
    }
    if !is_label_name(name) {
        return Some(rule.into());
    }
    None
}

/// `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`
fn is_label_name(s: &str) -> bool {
    let b = s.as_bytes();
    match (b.first(), b.last()) {
        (Some(first), Some(last)) => {
            first.is_ascii_alphanumeric()
                && last.is_ascii_alphanumeric()
                && b.iter()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
        }
        _ => false,
    }
}

/// Empty, or a label name, and at most 63 characters.
pub(super) fn is_label_value(s: &str) -> bool {
    s.len() <= 63 && (s.is_empty() || is_label_name(s))
}

/// RFC 1123 subdomain, lowercase: labels of `[a-z0-9]([-a-z0-9]*[a-z0-9])?` joined by
/// dots (the 253 limit is checked by the caller).
fn is_dns_subdomain(s: &str) -> bool {
    s.split('.').all(|label| {
        let b = label.as_bytes();
        match (b.first(), b.last()) {
            (Some(first), Some(last)) => {
                let end_ok = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit();
                end_ok(first) && end_ok(last) && b.iter().all(|c| end_ok(c) || *c == b'-')
            }
            _ => false,
        }
    })
}
