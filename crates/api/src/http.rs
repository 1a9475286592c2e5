//! HTTP/1.1 as far as the API needs it: one request read within bounds (line, head and body
//! sizes), a JSON response written, the bearer token compared in constant time.

use anyhow::{Context, Result};
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

const MAX_BODY: usize = 1 << 20;
const MAX_HEADER_LINES: usize = 100;
/// The most bytes of the request line or of one header line.
const MAX_LINE: usize = 8 << 10;
/// The most bytes of the request line and headers together.
const MAX_HEAD: usize = 64 << 10;

pub(crate) struct Request {
    pub(crate) method: String,
    pub(crate) path: String,
    pub(crate) host: Option<String>,
    pub(crate) bearer: Option<String>,
    pub(crate) body: Vec<u8>,
}

/// The request's head was over `MAX_LINE` or `MAX_HEAD` (answered 431).
#[derive(Debug, thiserror::Error)]
#[error("the request's headers are too large (at most {MAX_LINE} bytes a line, {MAX_HEAD} in all)")]
pub(crate) struct HeadTooLarge;

pub(crate) async fn read_request(stream: &mut BufReader<TcpStream>) -> Result<Request> {
    let mut head_left = MAX_HEAD;
    let mut line = String::new();
    read_head_line(stream, &mut line, &mut head_left).await?;
    let mut parts = line.split_whitespace();
    let (method, path) = (parts.next().unwrap_or("").to_owned(), parts.next().unwrap_or("").to_owned());
    anyhow::ensure!(!method.is_empty() && path.starts_with('/'), "not an HTTP request");
    let (mut host, mut bearer, mut length) = (None, None, 0usize);
    for _ in 0..MAX_HEADER_LINES {
        read_head_line(stream, &mut line, &mut head_left).await?;
        let header = line.trim_end();
        if header.is_empty() {
            let body = read_body(stream, length).await?;
            return Ok(Request { method, path, host, bearer, body });
        }
        let Some((name, value)) = header.split_once(':') else { anyhow::bail!("a malformed header") };
        let value = value.trim();
        match name.trim().to_ascii_lowercase().as_str() {
            "host" => host = Some(value.to_owned()),
            "authorization" => bearer = value.strip_prefix("Bearer ").map(|t| t.trim().to_owned()),
            "content-length" => length = value.parse().context("a malformed Content-Length")?,
            "transfer-encoding" => anyhow::bail!("chunked bodies are not accepted: send Content-Length"),
            _ => {}
        }
    }
    anyhow::bail!("too many headers")
}

/// Reads one line of the request's head into `line`: at most `MAX_LINE` bytes, and no more than
/// `head_left` (which it lowers). A line that reaches either bound without its end is refused
/// with `HeadTooLarge` having read only that much.
async fn read_head_line(stream: &mut BufReader<TcpStream>, line: &mut String, head_left: &mut usize) -> Result<()> {
    let limit = MAX_LINE.min(*head_left);
    let mut bytes = Vec::new();
    (&mut *stream).take(limit as u64).read_until(b'\n', &mut bytes).await?;
    *head_left -= bytes.len();
    if !bytes.ends_with(b"\n") {
        anyhow::ensure!(bytes.len() < limit, HeadTooLarge);
        anyhow::bail!("the connection ended inside the request's headers");
    }
    *line = String::from_utf8(bytes).context("a header that is not UTF-8")?;
    Ok(())
}

async fn read_body(stream: &mut BufReader<TcpStream>, length: usize) -> Result<Vec<u8>> {
    anyhow::ensure!(length <= MAX_BODY, "the body is over 1 MiB");
    let mut body = vec![0; length];
    stream.read_exact(&mut body).await?;
    Ok(body)
}

pub(crate) async fn respond(out: &mut (impl AsyncWrite + Unpin), status: u16, body: &Value) -> Result<()> {
    let reason = match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        408 => "Request Timeout",
        413 => "Content Too Large",
        431 => "Request Header Fields Too Large",
        503 => "Service Unavailable",
        _ => "Internal Server Error",
    };
    let body = body.to_string();
    let head = format!("HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n", body.len());
    out.write_all(head.as_bytes()).await?;
    out.write_all(body.as_bytes()).await?;
    out.shutdown().await?;
    Ok(())
}

pub(crate) fn error_body(message: &str) -> Value {
    json!({"error": {"message": message, "type": "invalid_request_error"}})
}

/// Equal secrets, compared in time that does not depend on where they differ.
pub(crate) fn same_secret(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_compare_by_content_and_length() {
        assert!(same_secret(b"abc", b"abc"));
        assert!(!same_secret(b"abc", b"abd"));
        assert!(!same_secret(b"abc", b"abcd"));
        assert!(!same_secret(b"", b"a"));
    }
}
