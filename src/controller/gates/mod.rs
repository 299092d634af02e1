//! The health gates' sources: what the controller reads beyond the nodes to tell whether
//! a node may start now (the verdicts and the failure policy are the core's:
//! [`crate::gates`], [`crate::alerts`], [`crate::budgets`]). Each records its outcomes
//! in the registry every pass reads ([`super::sources`]):
//!
//! - [`pause`]: the pause switch (`kumaco pause`), a Lease;
//! - [`checks`]: the object checks (`--block-unless`);
//! - [`alerts`]: Alertmanager's firing alerts and Prometheus queries;
//! - [`budgets`]: the PodDisruptionBudgets (watched) and the pods of the nodes about to
//!   start or in progress (listed when a pass asks for them).
//!
//! The blocking pods (`--block-pod-selector`) are [`super::pods`].

pub mod alerts;
pub mod budgets;
pub mod checks;
pub mod pause;
