//! YAML errors as kumaco reports them, from kubeconfigs and manifests alike.

/// A YAML error as `FILE:LINE:COLUMN` and a one-line message, the way compilers and
/// linters print them (editors jump to it). serde-saphyr's own `Display` adds a
/// multi-line source excerpt headed `<input>`, which names no file.
pub fn error_at(path: &str, e: &serde_saphyr::Error) -> (String, String) {
    use serde_saphyr::MessageFormatter;
    let at = match e.location() {
        Some(l) if l.line() > 0 => format!("{path}:{}:{}", l.line(), l.column()),
        _ => path.to_string(),
    };
    let message = serde_saphyr::UserMessageFormatter
        .format_message(e.without_snippet())
        .replace('\n', " ");
    (at, message)
}
