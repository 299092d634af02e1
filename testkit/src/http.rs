//! HTTP/1.1 requests to the programs the tests run or reach directly (kumaco's own
//! endpoints, Alertmanager, Prometheus), through hyper's client with nothing between the
//! test and the program; and a free loopback port for a program to listen on.

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::{Context, Result};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;

/// One request, answer and body included, must not hang a test.
const TIMEOUT: Duration = Duration::from_secs(10);

/// `GET path` on `address`: the status and the body.
pub async fn get(address: SocketAddr, path: &str) -> Result<(u16, String)> {
    request(address, None, "GET", path, None).await
}

/// `method path` on `address`, with an `Authorization` header if given and a JSON body
/// if given: the status and the body.
pub async fn request(
    address: SocketAddr,
    authorization: Option<&str>,
    method: &str,
    path: &str,
    body: Option<String>,
) -> Result<(u16, String)> {
    let what = format!("{method} http://{address}{path}");
    let mut builder = http::Request::builder()
        .method(method)
        .uri(format!("http://{address}{path}"))
        .header(http::header::CONTENT_TYPE, "application/json");
    if let Some(authorization) = authorization {
        builder = builder.header(http::header::AUTHORIZATION, authorization);
    }
    let request = builder
        .body(Full::<Bytes>::from(body.unwrap_or_default()))
        .with_context(|| what.clone())?;
    let exchange = async {
        let client = Client::builder(TokioExecutor::new()).build_http();
        let response = client.request(request).await?;
        let status = response.status().as_u16();
        let body = response.into_body().collect().await?.to_bytes();
        anyhow::Ok((status, String::from_utf8_lossy(&body).into_owned()))
    };
    tokio::time::timeout(TIMEOUT, exchange)
        .await
        .with_context(|| format!("{what} timed out"))?
        .with_context(|| what)
}

/// A free port on 127.0.0.1 now (kept by a program across its restarts).
pub fn free_port() -> Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}
