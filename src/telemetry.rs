//! Logging: tracing to stderr, as text or JSON, level from `RUST_LOG` (default `info`).

use std::ffi::OsString;
use std::io::IsTerminal;

use tracing_subscriber::EnvFilter;

use crate::cli::LogFormat;

pub fn init(format: LogFormat) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let colour = format == LogFormat::Text
        && use_colour(
            std::io::stderr().is_terminal(),
            std::env::var_os("NO_COLOR"),
        );
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(colour);
    // A second init (tests calling run twice in one process) keeps the first subscriber.
    let _ = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
    };
}

/// Whether text logs are coloured: only for a person at a terminal. In a file, a pipe or
/// a container log (`kubectl logs`), escape codes are noise that breaks `grep`. `NO_COLOR`
/// set to anything but the empty string turns colour off (<https://no-color.org>).
pub fn use_colour(stderr_is_terminal: bool, no_color: Option<OsString>) -> bool {
    stderr_is_terminal && no_color.is_none_or(|v| v.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colour_only_on_a_terminal_without_no_color() {
        assert!(use_colour(true, None));
        assert!(use_colour(true, Some("".into())));
        assert!(!use_colour(true, Some("1".into())));
        assert!(!use_colour(true, Some("false".into())));
        assert!(!use_colour(false, None));
    }
}
