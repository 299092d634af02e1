//! The HTTP endpoints: `/metrics`, `/healthz`, `/readyz`.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::http::StatusCode;
use axum::routing::get;
use tokio::net::TcpListener;

use super::Metrics;

/// Binds both addresses (they may be the same) and serves until the process ends.
/// Binding happens before this returns, so a port in use fails start-up loudly. Returns
/// the addresses bound, which differ from those asked for when those had port 0.
pub async fn serve(
    metrics: Arc<Metrics>,
    metrics_addr: SocketAddr,
    health_addr: SocketAddr,
) -> std::io::Result<(SocketAddr, SocketAddr)> {
    let health = {
        let ready = metrics.clone();
        Router::new()
            .route("/healthz", get(|| async { "ok" }))
            .route(
                "/readyz",
                get(move || {
                    let ready = ready.clone();
                    async move {
                        if ready.is_ready() {
                            (StatusCode::OK, "ok")
                        } else {
                            (
                                StatusCode::SERVICE_UNAVAILABLE,
                                "initial lists not complete",
                            )
                        }
                    }
                }),
            )
    };
    let metrics_router = Router::new().route(
        "/metrics",
        get(move || {
            let m = metrics.clone();
            async move {
                (
                    [(
                        axum::http::header::CONTENT_TYPE,
                        "application/openmetrics-text; version=1.0.0; charset=utf-8",
                    )],
                    m.encode(),
                )
            }
        }),
    );
    if metrics_addr == health_addr {
        let listener = TcpListener::bind(metrics_addr).await?;
        let bound = listener.local_addr()?;
        tokio::spawn(async move { axum::serve(listener, metrics_router.merge(health)).await });
        Ok((bound, bound))
    } else {
        let ml = TcpListener::bind(metrics_addr).await?;
        let hl = TcpListener::bind(health_addr).await?;
        let bound = (ml.local_addr()?, hl.local_addr()?);
        tokio::spawn(async move { axum::serve(ml, metrics_router).await });
        tokio::spawn(async move { axum::serve(hl, health).await });
        Ok(bound)
    }
}
