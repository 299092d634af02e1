//! Plain HTTP/1.1 requests to the monitoring programs the tests run on loopback
//! (Alertmanager, Prometheus): one connection per request (`Connection: close`), the body
//! de-chunked. Enough for their APIs, with nothing between the test and the program.

use std::time::Duration;

use anyhow::{Context, Result};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// `method path` on `127.0.0.1:port`, with an `Authorization` header if given: the
/// status and the body.
pub async fn request(
    port: u16,
    authorization: Option<&str>,
    method: &str,
    path: &str,
    body: Option<String>,
) -> Result<(u16, String)> {
    let authorization = authorization
        .map(|a| format!("Authorization: {a}\r\n"))
        .unwrap_or_default();
    let exchange = async {
        let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
        let body = body.unwrap_or_default();
        let head = format!(
            "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\
             {authorization}Content-Type: application/json\r\nContent-Length: {}\r\n\r\n",
            body.len()
        );
        stream.write_all(head.as_bytes()).await?;
        stream.write_all(body.as_bytes()).await?;
        let mut raw = Vec::new();
        stream.read_to_end(&mut raw).await?;
        anyhow::Ok(raw)
    };
    let raw = tokio::time::timeout(Duration::from_secs(10), exchange)
        .await
        .with_context(|| format!("{method} {path} timed out"))??;
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").context("no HTTP head")?;
    let code = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .context("bad status line")?;
    let chunked = head.lines().any(|l| {
        l.to_ascii_lowercase()
            .starts_with("transfer-encoding: chunked")
    });
    Ok((
        code,
        if chunked {
            dechunk(body)?
        } else {
            body.to_string()
        },
    ))
}

fn dechunk(mut s: &str) -> Result<String> {
    let mut out = String::new();
    loop {
        let (size, rest) = s.split_once("\r\n").context("bad chunk")?;
        let size = usize::from_str_radix(size.trim(), 16).context("bad chunk size")?;
        if size == 0 {
            return Ok(out);
        }
        out.push_str(rest.get(..size).context("short chunk")?);
        s = rest.get(size + 2..).context("short chunk")?;
    }
}

/// A free port on 127.0.0.1 now (kept by a program across its restarts).
pub fn free_port() -> Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}
