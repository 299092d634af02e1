//! An HTTP receiver on loopback that records every request it gets (when, the path, the
//! content type, the body) and answers as a test tells it: 200, another status, or never
//! (it holds the connection). HTTP/1.1 with keep-alive and `Content-Length` bodies, as
//! kumaco's client sends them; nothing more.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, Result};
use k8s_openapi::jiff::Timestamp;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// One request received.
#[derive(Clone, Debug)]
pub struct Received {
    pub at: Timestamp,
    pub method: String,
    pub path: String,
    pub content_type: String,
    pub body: String,
}

impl Received {
    /// The body as JSON (panics with the body if it is not).
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| {
            panic!(
                "{} {}: not JSON ({e}): {}",
                self.method, self.path, self.body
            )
        })
    }
}

/// How the receiver answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Answer {
    Status(u16),
    /// Reads the request and never answers.
    Hang,
}

#[derive(Default)]
struct Shared {
    received: Vec<Received>,
    answer: Option<Answer>,
}

pub struct Receiver {
    port: u16,
    shared: Arc<Mutex<Shared>>,
    task: tokio::task::JoinHandle<()>,
}

impl Receiver {
    /// Listens on a free loopback port, answering `answer`.
    pub async fn start(answer: Answer) -> Result<Receiver> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let port = listener.local_addr()?.port();
        let shared = Arc::new(Mutex::new(Shared {
            received: Vec::new(),
            answer: Some(answer),
        }));
        let serving = shared.clone();
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                tokio::spawn(serve(stream, serving.clone()));
            }
        });
        Ok(Receiver { port, shared, task })
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// Answers `answer` from now on.
    pub fn answer(&self, answer: Answer) {
        self.shared.lock().unwrap().answer = Some(answer);
    }

    /// Every request so far, in the order received.
    pub fn received(&self) -> Vec<Received> {
        self.shared.lock().unwrap().received.clone()
    }

    /// Waits until `done` holds of what was received, for at most `timeout`.
    pub async fn wait_for(
        &self,
        what: &str,
        timeout: Duration,
        done: impl Fn(&[Received]) -> bool,
    ) -> Result<Vec<Received>> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let received = self.received();
            if done(&received) {
                return Ok(received);
            }
            if tokio::time::Instant::now() > deadline {
                anyhow::bail!(
                    "{what}: not within {timeout:?}; received {} requests: {:#?}",
                    received.len(),
                    received.iter().rev().take(5).collect::<Vec<_>>()
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Serves one connection: requests one after the other until it closes.
async fn serve(mut stream: TcpStream, shared: Arc<Mutex<Shared>>) {
    let mut buf: Vec<u8> = Vec::new();
    loop {
        let Ok(Some(request)) = read_request(&mut stream, &mut buf).await else {
            return;
        };
        let answer = {
            let mut s = shared.lock().unwrap();
            s.received.push(request);
            s.answer.unwrap_or(Answer::Status(200))
        };
        match answer {
            Answer::Hang => {
                // Held until the client gives up and closes.
                let mut sink = [0u8; 64];
                while matches!(stream.read(&mut sink).await, Ok(n) if n > 0) {}
                return;
            }
            Answer::Status(code) => {
                let head = format!("HTTP/1.1 {code} X\r\nContent-Length: 2\r\n\r\nok");
                if stream.write_all(head.as_bytes()).await.is_err() {
                    return;
                }
            }
        }
    }
}

/// The next request on the connection, `None` when it closed.
async fn read_request(stream: &mut TcpStream, buf: &mut Vec<u8>) -> Result<Option<Received>> {
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i;
        }
        let mut chunk = [0u8; 8192];
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Ok(None);
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let mut lines = head.lines();
    let start = lines.next().context("no request line")?;
    let mut parts = start.split_whitespace();
    let method = parts.next().unwrap_or_default().to_string();
    let path = parts.next().unwrap_or_default().to_string();
    let (mut length, mut content_type) = (0usize, String::new());
    for line in lines {
        let Some((name, value)) = line.split_once(':') else {
            continue;
        };
        match name.trim().to_ascii_lowercase().as_str() {
            "content-length" => length = value.trim().parse().unwrap_or(0),
            "content-type" => content_type = value.trim().to_string(),
            _ => {}
        }
    }
    let body_start = head_end + 4;
    while buf.len() < body_start + length {
        let mut chunk = [0u8; 8192];
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Ok(None);
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    let body = String::from_utf8_lossy(&buf[body_start..body_start + length]).into_owned();
    buf.drain(..body_start + length);
    Ok(Some(Received {
        at: Timestamp::now(),
        method,
        path,
        content_type,
        body,
    }))
}
