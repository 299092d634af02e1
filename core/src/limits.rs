//! How much of a window ConfigMap kumaco reads: the bounds shared by the window's parser
//! ([`crate::window`]), the decoders of its values below it (the `nodeSelector`'s object
//! form, [`crate::selector::object`]) and the shell's trimmed copy of the ConfigMap.

/// Largest value of a data key kumaco accepts, in bytes. A ConfigMap may hold 1 MiB; a
/// window needs a few hundred bytes, and everything kumaco keeps or copies of a window
/// must stay small however large the ConfigMap is.
pub const MAX_VALUE_BYTES: usize = 4096;

/// Most requirements a window's `nodeSelector` may have: each is matched against every
/// node at every pass.
pub const MAX_SELECTOR_REQUIREMENTS: usize = 64;

/// Longest part of a window's description copied into a condition message, in bytes
/// (longer ones are cut, and linted).
pub const MAX_DESCRIPTION_BYTES: usize = 200;
