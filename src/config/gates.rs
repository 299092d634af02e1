//! The health gates' flags, validated into [`GateSettings`]. Like the policy's flags,
//! a gate flag given without `--in-progress` is refused rather than ignored: the gates
//! only ever hold a start of `MaintenanceInProgress`. The alerts gate's are in
//! [`alerts`].
//!
//! `--block-unless` takes one line naming Kubernetes objects and a CEL expression over
//! each ([`ObjectCheck`]):
//!
//! ```text
//! API_VERSION KIND [NAMESPACE/]NAME: EXPRESSION
//! API_VERSION KIND [NAMESPACE] -l SELECTOR: EXPRESSION
//! ```
//!
//! The first `:` ends the objects' part: none of an API version, a kind, a name or a
//! label selector can hold one. The expression is compiled here, so that one that does
//! not compile stops kumaco before it touches anything.

use std::sync::Arc;

pub(crate) mod alerts;

use super::{FlagError, SilenceSettings, flag_err};
use crate::cli::GateArgs;
use crate::selector::{self, Selector};
pub use alerts::AlertGate;

/// The variable an object check's expression reads the object from, as in a
/// ValidatingAdmissionPolicy.
pub const OBJECT_VARIABLE: &str = "object";

/// Longest expression `--block-unless` takes, in bytes: a check is a line, and the
/// expression is quoted into the nodes' messages.
const MAX_EXPRESSION_BYTES: usize = 4096;

/// What the health gates read.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GateSettings {
    /// `--pod-disruption-budgets`: a node starts only if every pod a drain would evict
    /// can be evicted now.
    pub budgets: bool,
    /// `--block-unless`: no node starts unless each of these holds.
    pub checks: Vec<ObjectCheck>,
    /// `--block-alerts`, `--block-query`: firing alerts and query results hold starts.
    pub alerts: Option<AlertGate>,
}

/// One `--block-unless`: which objects to read, and the expression each must satisfy.
#[derive(Clone)]
pub struct ObjectCheck {
    /// The flag's value as given, trimmed.
    pub spec: String,
    /// `group/version`, or `version` for the core group.
    pub api_version: String,
    pub kind: String,
    /// `None` for a cluster-scoped kind.
    pub namespace: Option<String>,
    pub target: Target,
    /// The expression as written.
    pub expression: String,
    pub program: Arc<cel::Program>,
}

/// Which objects of the kind a check reads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// The one object of this name; its absence fails the check.
    Name(String),
    /// Every object matching; each must satisfy the expression, and none matching
    /// satisfies the check.
    Selector(Selector),
}

impl ObjectCheck {
    /// The objects as messages name them: `CephCluster rook-ceph/rook-ceph`,
    /// `Cluster db -l app=pg`.
    pub fn objects(&self) -> String {
        let ns = self.namespace.as_deref();
        match (&self.target, ns) {
            (Target::Name(name), Some(ns)) => format!("{} {ns}/{name}", self.kind),
            (Target::Name(name), None) => format!("{} {name}", self.kind),
            (Target::Selector(s), Some(ns)) => format!("{} {ns} -l {s}", self.kind),
            (Target::Selector(s), None) => format!("{} -l {s}", self.kind),
        }
    }
}

/// Everything a check is follows from its spec.
impl PartialEq for ObjectCheck {
    fn eq(&self, other: &Self) -> bool {
        self.spec == other.spec
    }
}

impl Eq for ObjectCheck {}

impl std::fmt::Debug for ObjectCheck {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("ObjectCheck").field(&self.spec).finish()
    }
}

/// Why a `--block-unless` value is not a check.
#[derive(Debug, thiserror::Error)]
pub enum CheckSpecError {
    #[error("no `:` between the objects and the expression")]
    NoColon,
    #[error("nothing after the `:`: the expression is missing")]
    NoExpression,
    #[error("the expression is {0} bytes long, more than {MAX_EXPRESSION_BYTES}")]
    TooLong(usize),
    #[error("{0:?} is not an API version: expected group/version (ceph.rook.io/v1) or v1")]
    ApiVersion(String),
    #[error("the kind is missing after the API version")]
    NoKind,
    #[error(
        "{0:?} is not a kind: expected the kind as a manifest writes it (CephCluster), not \
         its resource name"
    )]
    Kind(String),
    #[error("nothing before the `:`: the objects are missing")]
    NoObjects,
    #[error("the object is missing after the kind")]
    NoObject,
    #[error("{0:?} is not a namespace: expected a DNS label (lowercase letters, digits, '-')")]
    Namespace(String),
    #[error("{0:?} is not an object name")]
    Name(String),
    #[error("unexpected {0:?} after the object: a label selector comes after -l")]
    Trailing(String),
    #[error("-l needs a label selector")]
    NoSelector,
    #[error("-l: {0}")]
    Selector(#[from] selector::SelectorError),
    #[error("the expression does not compile: {0}")]
    Compile(String),
    #[error("the expression never reads `{OBJECT_VARIABLE}`, the object it is checked against")]
    NoObjectVariable,
}

impl CheckSpecError {
    /// Whether the objects' part is wrong, so the message should show the forms.
    fn in_objects(&self) -> bool {
        !matches!(
            self,
            CheckSpecError::NoExpression
                | CheckSpecError::TooLong(_)
                | CheckSpecError::Compile(_)
                | CheckSpecError::NoObjectVariable
        )
    }
}

/// The forms a `--block-unless` value takes, for messages.
const FORMS: &str = "expected 'API_VERSION KIND [NAMESPACE/]NAME: EXPRESSION' or \
                     'API_VERSION KIND [NAMESPACE] -l SELECTOR: EXPRESSION'";

/// `silences`: the `--alertmanager-url` settings, which the alerts gate shares.
pub fn from_args(
    args: &GateArgs,
    in_progress: bool,
    silences: Option<&SilenceSettings>,
) -> Result<GateSettings, FlagError> {
    if !in_progress {
        if let Some(flag) = first_given(args) {
            return Err(flag_err(flag, "only has an effect with --in-progress"));
        }
        alerts::unused_alertmanager(silences)?;
        return Ok(GateSettings::default());
    }
    let checks = args
        .block_unless
        .iter()
        .map(|spec| {
            parse_check(spec).map_err(|e| {
                let spec = spec.trim();
                if e.in_objects() {
                    flag_err("block-unless", format!("'{spec}': {e}; {FORMS}"))
                } else {
                    flag_err("block-unless", format!("'{spec}': {e}"))
                }
            })
        })
        .collect::<Result<_, _>>()?;
    Ok(GateSettings {
        budgets: args.pod_disruption_budgets.unwrap_or(true),
        checks,
        alerts: alerts::from_args(args, silences)?,
    })
}

/// The first gate flag given, if any.
fn first_given(args: &GateArgs) -> Option<&'static str> {
    [
        (
            args.pod_disruption_budgets.is_some(),
            "pod-disruption-budgets",
        ),
        (!args.block_unless.is_empty(), "block-unless"),
    ]
    .into_iter()
    .chain(alerts::given(args))
    .find_map(|(given, flag)| given.then_some(flag))
}

/// Parses one `--block-unless` value and compiles its expression.
pub fn parse_check(spec: &str) -> Result<ObjectCheck, CheckSpecError> {
    let spec = spec.trim();
    let (objects, expression) = spec.split_once(':').ok_or(CheckSpecError::NoColon)?;
    let expression = expression.trim();
    let (head, selector) = split_selector(objects);
    let mut words = head.split_whitespace();
    let api_version = words.next().ok_or(CheckSpecError::NoObjects)?;
    if !is_api_version(api_version) {
        return Err(CheckSpecError::ApiVersion(api_version.into()));
    }
    let kind = words.next().ok_or(CheckSpecError::NoKind)?;
    if !kind.starts_with(|c: char| c.is_ascii_uppercase())
        || !kind.chars().all(|c| c.is_ascii_alphanumeric())
    {
        return Err(CheckSpecError::Kind(kind.into()));
    }
    let object = words.next();
    if let Some(extra) = words.next() {
        return Err(CheckSpecError::Trailing(extra.into()));
    }
    let (namespace, target) = match (object, selector) {
        (None, None) => return Err(CheckSpecError::NoObject),
        (Some(object), None) => match object.split_once('/') {
            Some((ns, name)) if !name.is_empty() && !name.contains('/') => {
                (Some(valid_namespace(ns)?), Target::Name(name.into()))
            }
            Some((_, name)) => return Err(CheckSpecError::Name(name.into())),
            None => (None, Target::Name(object.into())),
        },
        (namespace, Some(text)) => {
            if text.is_empty() {
                return Err(CheckSpecError::NoSelector);
            }
            let namespace = namespace.map(valid_namespace).transpose()?;
            (namespace, Target::Selector(selector::parse(text)?))
        }
    };
    if expression.is_empty() {
        return Err(CheckSpecError::NoExpression);
    }
    if expression.len() > MAX_EXPRESSION_BYTES {
        return Err(CheckSpecError::TooLong(expression.len()));
    }
    let program =
        cel::Program::compile(expression).map_err(|e| CheckSpecError::Compile(e.to_string()))?;
    // A misspelt variable (`obj.status`) compiles, and would fail every evaluation.
    if !program.references().has_variable(OBJECT_VARIABLE) {
        return Err(CheckSpecError::NoObjectVariable);
    }
    Ok(ObjectCheck {
        spec: spec.into(),
        api_version: api_version.into(),
        kind: kind.into(),
        namespace,
        target,
        expression: expression.into(),
        program: Arc::new(program),
    })
}

/// The objects' part before a word `-l`, and the label selector after it (trimmed; it
/// may hold spaces: `app in (a, b)`).
fn split_selector(objects: &str) -> (&str, Option<&str>) {
    let word = |i: usize| {
        let before = objects[..i].chars().next_back();
        let after = objects[i + 2..].chars().next();
        before.is_none_or(char::is_whitespace) && after.is_none_or(char::is_whitespace)
    };
    match objects
        .match_indices("-l")
        .map(|(i, _)| i)
        .find(|&i| word(i))
    {
        Some(i) => (&objects[..i], Some(objects[i + 2..].trim())),
        None => (objects, None),
    }
}

fn valid_namespace(ns: &str) -> Result<String, CheckSpecError> {
    let ok = !ns.is_empty()
        && ns.len() <= 63
        && ns
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !ns.starts_with('-')
        && !ns.ends_with('-');
    if ok {
        Ok(ns.into())
    } else {
        Err(CheckSpecError::Namespace(ns.into()))
    }
}

/// `group/version` or `version`, each part lowercase letters, digits, '.' and '-'.
fn is_api_version(s: &str) -> bool {
    let part = |p: &str| {
        !p.is_empty()
            && p.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '.' || c == '-')
    };
    match s.split_once('/') {
        Some((group, version)) => part(group) && part(version),
        None => part(s),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CEPH: &str = r#"ceph.rook.io/v1 CephCluster rook-ceph/rook-ceph: object.status.ceph.health == "HEALTH_OK""#;

    #[test]
    fn a_named_namespaced_object() {
        let c = parse_check(CEPH).unwrap();
        assert_eq!(c.api_version, "ceph.rook.io/v1");
        assert_eq!(c.kind, "CephCluster");
        assert_eq!(c.namespace.as_deref(), Some("rook-ceph"));
        assert_eq!(c.target, Target::Name("rook-ceph".into()));
        assert_eq!(c.expression, r#"object.status.ceph.health == "HEALTH_OK""#);
        assert_eq!(c.objects(), "CephCluster rook-ceph/rook-ceph");
    }

    #[test]
    fn selectors_cluster_scope_and_the_core_group() {
        let c = parse_check(
            "postgresql.cnpg.io/v1 Cluster db -l app in (pg, pg2),tier: \
             object.status.readyInstances == object.spec.instances",
        )
        .unwrap();
        assert_eq!(c.namespace.as_deref(), Some("db"));
        let Target::Selector(s) = &c.target else {
            panic!("{:?}", c.target)
        };
        assert_eq!(s.to_string(), "app in (pg,pg2),tier");
        assert_eq!(c.objects(), "Cluster db -l app in (pg,pg2),tier");

        let c = parse_check("v1 Node -l role=storage: object.spec.unschedulable != true").unwrap();
        assert_eq!(
            (c.api_version.as_str(), c.namespace.as_deref()),
            ("v1", None)
        );
        assert!(matches!(c.target, Target::Selector(_)));
        assert_eq!(c.objects(), "Node -l role=storage");

        let c = parse_check("  example.com/v1 Thing the-one:has(object.status)  ").unwrap();
        assert_eq!(c.namespace, None);
        assert_eq!(c.target, Target::Name("the-one".into()));
        assert_eq!(c.spec, "example.com/v1 Thing the-one:has(object.status)");
    }

    /// Each bad spec, and a word of what its error must say.
    #[test]
    fn bad_specs_say_what_is_wrong() {
        let cases = [
            ("ceph.rook.io/v1 CephCluster rook-ceph/x", "no `:`"),
            (
                "ceph.rook.io/v1 CephCluster rook-ceph/x:  ",
                "expression is missing",
            ),
            (": object.x", "the objects are missing"),
            ("Ceph.Rook/v1 CephCluster a: object.x", "not an API version"),
            ("a/b/c CephCluster a: object.x", "not an API version"),
            ("ceph.rook.io/v1: object.x", "kind is missing"),
            (
                "ceph.rook.io/v1 cephclusters a: object.x",
                "not its resource name",
            ),
            ("ceph.rook.io/v1 CephCluster: object.x", "object is missing"),
            (
                "ceph.rook.io/v1 CephCluster Rook_Ceph/x: object.x",
                "not a namespace",
            ),
            (
                "ceph.rook.io/v1 CephCluster ns/: object.x",
                "not an object name",
            ),
            (
                "ceph.rook.io/v1 CephCluster ns/a/b: object.x",
                "not an object name",
            ),
            (
                "ceph.rook.io/v1 CephCluster ns/a b: object.x",
                r#"unexpected "b""#,
            ),
            (
                "ceph.rook.io/v1 CephCluster ns a: object.x",
                r#"unexpected "a""#,
            ),
            (
                "ceph.rook.io/v1 CephCluster ns -l : object.x",
                "needs a label selector",
            ),
            ("ceph.rook.io/v1 CephCluster ns -l a=(: object.x", "-l: "),
            (
                "ceph.rook.io/v1 CephCluster NS -l a: object.x",
                "not a namespace",
            ),
            (
                "ceph.rook.io/v1 CephCluster ns/a: object.x ==",
                "does not compile",
            ),
            (
                "ceph.rook.io/v1 CephCluster ns/a: obj.status.x == 1",
                "never reads `object`",
            ),
        ];
        for (spec, expected) in cases {
            let e = parse_check(spec).map(|c| c.spec).unwrap_err().to_string();
            assert!(e.contains(expected), "{spec}: {e}");
        }
        let long = format!("v1 Node a: object.x == '{}'", "y".repeat(5000));
        let e = parse_check(&long).map(|c| c.spec).unwrap_err();
        assert!(matches!(e, CheckSpecError::TooLong(_)), "{e}");
    }

    #[test]
    fn the_flag_error_names_the_flag_the_spec_and_the_parser_message() {
        let args = GateArgs {
            block_unless: vec![
                "v1 Node a: object.status.phase == 'Running'".into(),
                "ceph.rook.io/v1 CephCluster ns/a: object.status.(".into(),
            ],
            ..GateArgs::default()
        };
        let e = from_args(&args, true, None).unwrap_err().to_string();
        assert!(
            e.starts_with("--block-unless: 'ceph.rook.io/v1 CephCluster ns/a: object.status.(': the expression does not compile: ERROR: <input>:1:"),
            "{e}"
        );
        assert!(!e.contains(FORMS), "a compile error needs no grammar: {e}");
        let args = GateArgs {
            block_unless: vec!["v1 Node: object.x".into()],
            ..GateArgs::default()
        };
        let e = from_args(&args, true, None).unwrap_err().to_string();
        assert!(e.ends_with(FORMS), "{e}");
    }

    #[test]
    fn checks_only_with_in_progress() {
        let args = GateArgs {
            block_unless: vec![CEPH.into()],
            ..GateArgs::default()
        };
        let e = from_args(&args, false, None).unwrap_err().to_string();
        assert_eq!(e, "--block-unless: only has an effect with --in-progress");
        let s = from_args(&args, true, None).unwrap();
        assert_eq!(s.checks.len(), 1);
        assert!(s.budgets);
    }
}
