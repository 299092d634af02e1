//! A client for `testenv/oracle`: the real Go code kumaco's parsers are compared with.
//!
//! One oracle process answers many requests: callers send a batch (thousands of
//! requests) and get the answers back in order. A writer thread feeds the process while
//! this thread reads, so a large batch cannot deadlock on full pipes.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::process::{ChildStdin, ChildStdout, Command, Stdio};

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};

use crate::gobuild::{Program, binary};
use crate::process::Owned;

/// One question for the oracle. See testenv/oracle/main.go for the protocol.
#[derive(Clone, Debug, Serialize)]
#[serde(tag = "op", rename_all = "lowercase")]
pub enum Request {
    /// Go `time.ParseDuration(input)`.
    Duration { input: String },
    /// robfig/cron v3 `ParseStandard(input)`, then `count` times `Next`, starting from
    /// `from` (Unix nanoseconds) expressed in time zone `zone`.
    Cron {
        input: String,
        zone: String,
        from: i64,
        count: u32,
    },
    /// apimachinery `labels.Parse(input)`, its `String()`, and `Matches` on each set.
    Selector {
        input: String,
        labels: Vec<BTreeMap<String, String>>,
    },
    /// apimachinery `metav1.LabelSelectorAsSelector` of `object` (a `metav1.LabelSelector`
    /// in JSON, decoded strictly; `null` is Go's nil selector), its `String()`, each
    /// requirement's `String()` and `Matches` on each set.
    LabelSelector {
        object: serde_json::Value,
        labels: Vec<BTreeMap<String, String>>,
    },
    /// The same for `input`, text as a ConfigMap value holds it, read as Kubernetes reads
    /// YAML into its types (`sigs.k8s.io/yaml.Unmarshal`: lenient).
    LabelSelectorYaml {
        input: String,
        labels: Vec<BTreeMap<String, String>>,
    },
}

/// The oracle's answer; which fields are set depends on the request.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
pub struct Answer {
    pub ok: bool,
    #[serde(default)]
    pub error: Option<String>,
    /// Duration: the value in nanoseconds.
    #[serde(default)]
    pub nanos: Option<i64>,
    /// Cron: successive `Next` results in Unix nanoseconds; 0 is Go's zero time (never).
    #[serde(default)]
    pub next: Option<Vec<i64>>,
    /// Cron `@every`: robfig's delay after clamping and truncation, in nanoseconds.
    #[serde(default)]
    pub every: Option<i64>,
    /// Duration and selector: Go's `String()` of the parsed value.
    #[serde(default)]
    pub string: Option<String>,
    /// Label selector: each requirement's `String()`, in the selector's order.
    #[serde(default)]
    pub parts: Option<Vec<String>>,
    /// Selector and label selector: `Matches` for each label set of the request.
    #[serde(default)]
    pub matches: Option<Vec<bool>>,
    /// Label selector from YAML: the text is Go's nil selector (it selects nothing).
    #[serde(default)]
    pub nothing: bool,
}

/// A running oracle process.
pub struct Oracle {
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    _process: Owned,
}

impl Oracle {
    /// Builds (once per machine) and starts the oracle.
    pub fn start() -> Result<Self> {
        let mut command = Command::new(binary(Program::Oracle)?);
        command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        let mut process = Owned::spawn("the oracle", command, None)?;
        let stdin = process.take_stdin();
        let stdout = BufReader::new(process.take_stdout().expect("piped stdout"));
        Ok(Oracle {
            stdin,
            stdout,
            _process: process,
        })
    }

    /// Sends every request and returns the answers in the same order.
    pub fn ask(&mut self, requests: &[Request]) -> Result<Vec<Answer>> {
        let mut lines = Vec::with_capacity(requests.len());
        for r in requests {
            let mut line = serde_json::to_vec(r)?;
            line.push(b'\n');
            lines.push(line);
        }
        let stdin = self.stdin.take().context("oracle stdin already closed")?;
        let writer = std::thread::spawn(move || -> std::io::Result<ChildStdin> {
            let mut w = BufWriter::new(stdin);
            for line in lines {
                w.write_all(&line)?;
            }
            w.flush()?;
            w.into_inner().map_err(|e| e.into_error())
        });
        let mut answers = Vec::with_capacity(requests.len());
        let mut buf = String::new();
        for i in 0..requests.len() {
            buf.clear();
            if self.stdout.read_line(&mut buf)? == 0 {
                bail!("oracle exited after {i} of {} answers", requests.len());
            }
            answers.push(
                serde_json::from_str(&buf)
                    .with_context(|| format!("oracle answer {i} is not JSON: {buf}"))?,
            );
        }
        let stdin = writer
            .join()
            .map_err(|_| anyhow::anyhow!("oracle writer thread panicked"))??;
        self.stdin = Some(stdin);
        Ok(answers)
    }
}
