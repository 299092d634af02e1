//! An HTTP request as plain data (method, endpoint, headers, body), for the delivery to
//! send; and the [`Endpoint`] it goes to.
//!
//! A webhook's URL is its password: Slack's, Discord's, Mattermost's and a Teams
//! workflow's carry the token in the path, Google Chat's in the query. So an [`Endpoint`]
//! shows only its scheme and host, in `Debug`, `Display` and errors alike; a header that
//! came from the operator's URL is marked sensitive, which `http` prints as `Sensitive`.

use std::fmt;

use http::header::{CONTENT_TYPE, HeaderName, HeaderValue};
use http::{Method, Uri};

/// The URL a message is posted to, its secrets kept out of every text.
#[derive(Clone, PartialEq, Eq)]
pub struct Endpoint(Uri);

/// A URL that is not an absolute `http://` or `https://` URL with a host. Names no part of
/// the URL: any of it may be a token.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum EndpointError {
    #[error("not a URL kumaco can post to: expected https://HOST[:PORT]/PATH[?QUERY]")]
    Invalid,
}

impl Endpoint {
    /// An absolute `http://` or `https://` URL with a host.
    pub fn parse(url: &str) -> Result<Endpoint, EndpointError> {
        let uri: Uri = url.parse().map_err(|_| EndpointError::Invalid)?;
        if !matches!(uri.scheme_str(), Some("http" | "https"))
            || uri.host().is_none_or(str::is_empty)
        {
            return Err(EndpointError::Invalid);
        }
        Ok(Endpoint(uri))
    }

    /// The whole URL, secrets included: for sending only.
    pub fn uri(&self) -> &Uri {
        &self.0
    }

    /// What may be shown: `https://hooks.slack.com/…`.
    pub fn redacted(&self) -> String {
        let scheme = self.0.scheme_str().unwrap_or("https");
        let host = self.0.host().unwrap_or_default();
        match self.0.port_u16() {
            Some(port) => format!("{scheme}://{host}:{port}/…"),
            None => format!("{scheme}://{host}/…"),
        }
    }
}

impl fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Endpoint({})", self.redacted())
    }
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.redacted())
    }
}

/// One request to send: built whole, so that sending it is all the delivery does.
#[derive(Clone, PartialEq, Eq)]
pub struct Request {
    pub method: Method,
    pub endpoint: Endpoint,
    /// `Content-Type` first; then any the operator's URL asked for (sensitive).
    pub headers: Vec<(HeaderName, HeaderValue)>,
    pub body: Vec<u8>,
}

impl Request {
    /// A `POST` of `body` with its `Content-Type`.
    pub fn post(endpoint: Endpoint, content_type: &'static str, body: Vec<u8>) -> Request {
        Request {
            method: Method::POST,
            endpoint,
            headers: vec![(CONTENT_TYPE, HeaderValue::from_static(content_type))],
            body,
        }
    }

    /// The request as `http` has it, for a client to send.
    pub fn into_http(self) -> http::Request<Vec<u8>> {
        let mut request = http::Request::new(self.body);
        *request.method_mut() = self.method;
        *request.uri_mut() = self.endpoint.0;
        let headers = request.headers_mut();
        for (name, value) in self.headers {
            headers.append(name, value);
        }
        request
    }

    /// The value of a header, for tests and logs of the ones that are not sensitive.
    pub fn header(&self, name: &HeaderName) -> Option<&HeaderValue> {
        self.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v)
    }
}

impl fmt::Debug for Request {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Request")
            .field("method", &self.method)
            .field("endpoint", &self.endpoint)
            .field("headers", &self.headers)
            .field("body_bytes", &self.body.len())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &str = "T0000SECRET";

    #[test]
    fn an_endpoint_shows_its_scheme_and_host_only() {
        let e = Endpoint::parse(&format!(
            "https://hooks.example.com:8443/services/{SECRET}?token={SECRET}"
        ))
        .unwrap();
        assert_eq!(e.redacted(), "https://hooks.example.com:8443/…");
        assert_eq!(
            format!("{e:?}"),
            "Endpoint(https://hooks.example.com:8443/…)"
        );
        assert_eq!(e.to_string(), "https://hooks.example.com:8443/…");
        assert_eq!(
            e.uri().to_string(),
            format!("https://hooks.example.com:8443/services/{SECRET}?token={SECRET}")
        );
    }

    #[test]
    fn only_absolute_http_urls_are_endpoints() {
        for bad in [
            "",
            "hooks.example.com/x",
            "/services/x",
            "ftp://example.com/x",
            "https:///x",
            "https://exa mple.com/",
        ] {
            assert_eq!(Endpoint::parse(bad), Err(EndpointError::Invalid), "{bad:?}");
        }
        assert!(Endpoint::parse("http://127.0.0.1:8080/hook").is_ok());
    }

    #[test]
    fn a_request_hides_its_secrets_in_debug_and_keeps_them_for_sending() {
        let mut sensitive = HeaderValue::from_str(&format!("Bearer {SECRET}")).unwrap();
        sensitive.set_sensitive(true);
        let mut r = Request::post(
            Endpoint::parse(&format!("https://example.com/hooks/{SECRET}")).unwrap(),
            "application/json",
            b"{}".to_vec(),
        );
        r.headers
            .push((http::header::AUTHORIZATION, sensitive.clone()));
        let shown = format!("{r:?}");
        assert!(!shown.contains(SECRET), "{shown}");
        assert_eq!(
            shown,
            "Request { method: POST, endpoint: Endpoint(https://example.com/…), headers: \
             [(\"content-type\", \"application/json\"), (\"authorization\", Sensitive)], \
             body_bytes: 2 }"
        );
        assert_eq!(
            r.header(&CONTENT_TYPE),
            Some(&HeaderValue::from_static("application/json"))
        );
        let sent = r.into_http();
        assert_eq!(sent.method(), Method::POST);
        assert_eq!(
            sent.uri().to_string(),
            format!("https://example.com/hooks/{SECRET}")
        );
        assert_eq!(sent.headers()[http::header::AUTHORIZATION], sensitive);
        assert_eq!(sent.body(), b"{}");
    }
}
