//! Messages to the channels operators use, one per maintenance transition (the core's
//! `notice`): what goes on the wire, how it is sent, and the record of what was. The
//! queues, the pace and the retries are the controller's (`controller::notifier`).
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
//! - [`sink`]: a sink as the flags or `--notify-config` give it, and the request that
//!   carries a batch of notices to it (a chat's digest, a CloudEvent, alerts);
//!   [`deliver`]: one attempt to send it, and what the answer means.
//! - [`record`]: what each sink was told, on the Lease `<lease name>-notified`.

pub mod cloudevents;
pub mod deliver;
pub mod payload;
pub mod record;
pub mod request;
pub mod sink;
pub mod template;
pub mod url;
