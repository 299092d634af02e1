//! Messages to the channels operators use, one per maintenance transition (the core's
//! `notice`), built as plain data: what goes on the wire, never the sending. The delivery
//! (queues, retries, rate limits, the digests' timing, the once-only record) sends what
//! these build.
//!
//! - [`url`]: kured v1's `--notify-url` (shoutrrr's URLs for Slack, Teams, Google Chat,
//!   Mattermost, Discord and generic webhooks) parsed into a [`url::Target`]: the service,
//!   its HTTPS endpoint and options; the tokens in it never shown.
//! - [`request`]: an HTTP request as plain data, and the [`request::Endpoint`] whose URL
//!   holds secrets, both redacted in `Debug`.
//! - [`payload`]: one message (a title and a text) as the body each service's incoming
//!   webhook documents, within its size limits.
//! - [`cloudevents`]: one notice as a CloudEvents 1.0 event in JSON (structured mode), for
//!   machines.
//! - [`template`]: kured v1's `--message-template-*` as they are, and richer templates
//!   (MiniJinja) over every field of a notice, bounded and never failing a message.

pub mod cloudevents;
pub mod payload;
pub mod request;
pub mod template;
pub mod url;
