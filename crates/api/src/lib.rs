//! An optional OpenAI-compatible API over the engine, for other tools on this machine: off
//! unless started (`quire serve`, or the app's Privacy settings), bound to the loopback
//! interface only, every request carrying the bearer token kept in the OS keychain.
//!
//! Endpoints: `GET /v1/models` and `POST /v1/chat/completions` (the last user message is the
//! question; the reply is the cited answer, sources listed after it; `"stream": true` sends it
//! as server-sent events). One request per connection, answers one at a time.
//!
//! Checks, in order: the peer is a loopback address; the request line and each header line are
//! at most 8 KiB and the whole head at most 64 KiB (431 otherwise, before any authentication, so
//! an endless header costs 64 KiB, not memory without bound); the `Host` header names the
//! loopback (so a web page cannot reach it through DNS rebinding); the bearer token matches
//! (compared in constant time); the body is at most 1 MiB of JSON.
//!
//! Answers are generated one at a time; at most `MAX_WAITING` chat requests wait for their turn
//! (503 beyond that). A client that disconnects, while waiting or while its answer is being
//! generated, cancels it: the connection is watched for its end from the moment the request
//! has been read.

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result};
use quire_engine::{Answer, Cancel, Engine, Event};
use serde::Deserialize;
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};

const MAX_BODY: usize = 1 << 20;
const MAX_HEADER_LINES: usize = 100;
/// The most bytes of the request line or of one header line.
const MAX_LINE: usize = 8 << 10;
/// The most bytes of the request line and headers together.
const MAX_HEAD: usize = 64 << 10;
/// Chat requests that may wait while another is answered.
pub const MAX_WAITING: usize = 4;
/// The model name the API answers to.
pub const MODEL_ID: &str = "quire";

/// Where the server gets the engine for each request: the app's open collection may change, or
/// be locked, while the API runs.
pub type EngineSource = Arc<dyn Fn() -> futures::future::BoxFuture<'static, Result<Arc<Engine>>> + Send + Sync>;

/// An engine source that always gives `engine`.
pub fn fixed(engine: Arc<Engine>) -> EngineSource {
    Arc::new(move || {
        let engine = engine.clone();
        Box::pin(async move { Ok(engine) })
    })
}

pub struct Server {
    listener: TcpListener,
    token: String,
    engine: EngineSource,
    answering: tokio::sync::Mutex<()>,
    /// Chat requests waiting for or holding `answering`.
    chats: std::sync::atomic::AtomicUsize,
}

impl Server {
    /// Binds 127.0.0.1:`port` (0: any free port).
    pub async fn bind(engine: EngineSource, port: u16, token: String) -> Result<Server> {
        anyhow::ensure!(token.len() >= 32, "the API token is too short");
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, port))
            .await
            .with_context(|| format!("cannot listen on 127.0.0.1:{port} (in use?)"))?;
        Ok(Server { listener, token, engine, answering: Default::default(), chats: Default::default() })
    }

    pub fn local_addr(&self) -> Result<SocketAddr> {
        Ok(self.listener.local_addr()?)
    }

    /// Serves until `stop` is cancelled (checked between connections, at least every second).
    pub async fn run(self: Arc<Self>, stop: Cancel) -> Result<()> {
        while !stop.is_cancelled() {
            let accepted = tokio::time::timeout(Duration::from_secs(1), self.listener.accept()).await;
            let Ok(accepted) = accepted else { continue };
            let (stream, peer) = accepted?;
            let server = self.clone();
            tokio::spawn(async move {
                let _ = server.handle(stream, peer).await;
            });
        }
        Ok(())
    }

    async fn handle(&self, stream: TcpStream, peer: SocketAddr) -> Result<()> {
        let mut stream = BufReader::new(stream);
        if !peer.ip().is_loopback() {
            return respond(stream.get_mut(), 403, &error_body("only this machine may use the API")).await;
        }
        let request = match tokio::time::timeout(Duration::from_secs(30), read_request(&mut stream)).await {
            Ok(Ok(r)) => r,
            Ok(Err(e)) if e.is::<HeadTooLarge>() => {
                return respond(stream.get_mut(), 431, &error_body(&format!("{e:#}"))).await
            }
            Ok(Err(e)) => return respond(stream.get_mut(), 400, &error_body(&format!("{e:#}"))).await,
            Err(_) => return respond(stream.get_mut(), 408, &error_body("the request took too long to arrive")).await,
        };
        let port = self.local_addr()?.port();
        let host_ok = request.host.as_deref().is_some_and(|h| {
            [format!("127.0.0.1:{port}"), format!("localhost:{port}"), format!("[::1]:{port}")]
                .iter()
                .any(|ok| h.eq_ignore_ascii_case(ok))
        });
        if !host_ok {
            return respond(
                stream.get_mut(),
                403,
                &error_body("the Host header must name 127.0.0.1 or localhost with this port"),
            )
            .await;
        }
        let presented = request.bearer.as_deref().unwrap_or("");
        if !same_secret(presented.as_bytes(), self.token.as_bytes()) {
            return respond(
                stream.get_mut(),
                401,
                &error_body("missing or wrong bearer token (`quire key api-token` prints it)"),
            )
            .await;
        }
        match (request.method.as_str(), request.path.as_str()) {
            ("GET", "/v1/models") => {
                let body = json!({"object": "list", "data": [{"id": MODEL_ID, "object": "model", "created": 0, "owned_by": "quire"}]});
                respond(stream.get_mut(), 200, &body).await
            }
            ("POST", "/v1/chat/completions") => {
                let chat: ChatRequest = match serde_json::from_slice(&request.body) {
                    Ok(c) => c,
                    Err(e) => {
                        return respond(
                            stream.get_mut(),
                            400,
                            &error_body(&format!("the body is not a chat request: {e}")),
                        )
                        .await
                    }
                };
                let Some(question) = chat.messages.iter().rev().find(|m| m.role == "user").map(|m| m.content.text())
                else {
                    return respond(stream.get_mut(), 400, &error_body("no user message to answer")).await;
                };
                self.chat(stream.into_inner(), &question, chat.stream).await
            }
            _ => {
                respond(
                    stream.get_mut(),
                    404,
                    &error_body("unknown endpoint: use GET /v1/models or POST /v1/chat/completions"),
                )
                .await
            }
        }
    }

    async fn chat(&self, connection: TcpStream, question: &str, stream: bool) -> Result<()> {
        let (reader, mut out) = connection.into_split();
        let out = &mut out;
        // From here on the client only reads: the end of its side means it is gone.
        let cancel = Cancel::new();
        let mut gone = AbortOnDrop(tokio::spawn(until_closed(reader, cancel.clone())));
        let waiting = Waiting::enter(&self.chats);
        if waiting.count > MAX_WAITING + 1 {
            return respond(out, 503, &error_body("busy: too many questions are waiting; try again shortly")).await;
        }
        let _turn = tokio::select! {
            turn = self.answering.lock() => turn,
            _ = &mut gone.0 => return Ok(()), // left before its turn: nothing is generated
        };
        let engine = match (self.engine)().await {
            Ok(e) => e,
            Err(e) => return respond(out, 503, &error_body(&format!("{e:#}"))).await,
        };
        let id = format!("chatcmpl-{}", now_ms());
        if !stream {
            return match engine.ask(question, &mut |_| {}, &cancel).await {
                Ok(answer) => respond(out, 200, &completion(&id, &answer)).await,
                Err(_) if cancel.is_cancelled() => Ok(()),
                Err(e) => respond(out, 500, &error_body(&format!("{e:#}"))).await,
            };
        }
        out.write_all(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\nConnection: close\r\n\r\n").await?;
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<String>();
        let asking = {
            let (q, cancel) = (question.to_owned(), cancel.clone());
            tokio::spawn(async move {
                engine
                    .ask(
                        &q,
                        &mut |e| {
                            if let Event::AnswerDelta { text } = e {
                                let _ = tx.send(text);
                            }
                        },
                        &cancel,
                    )
                    .await
            })
        };
        while let Some(text) = rx.recv().await {
            let chunk = json!({"id": id, "object": "chat.completion.chunk", "created": now_ms() / 1000, "model": MODEL_ID,
                "choices": [{"index": 0, "delta": {"role": "assistant", "content": text}, "finish_reason": null}]});
            if out.write_all(format!("data: {chunk}\n\n").as_bytes()).await.is_err() {
                cancel.cancel(); // the client went away
            }
        }
        let tail = match asking.await? {
            Ok(answer) => format!("\n\n{}", sources_text(&answer)),
            Err(_) if cancel.is_cancelled() => return Ok(()),
            Err(e) => format!("\n\n(error: {e:#})"),
        };
        let last = json!({"id": id, "object": "chat.completion.chunk", "created": now_ms() / 1000, "model": MODEL_ID,
            "choices": [{"index": 0, "delta": {"content": tail}, "finish_reason": "stop"}]});
        out.write_all(format!("data: {last}\n\ndata: [DONE]\n\n").as_bytes()).await?;
        Ok(())
    }
}

/// Reads (and drops) whatever the client still sends until its side of the connection ends,
/// then cancels its answer.
async fn until_closed(mut reader: tokio::net::tcp::OwnedReadHalf, cancel: Cancel) {
    let mut buf = [0u8; 1024];
    while let Ok(n) = reader.read(&mut buf).await {
        if n == 0 {
            break;
        }
    }
    cancel.cancel();
}

/// A task stopped when its handle is dropped: the watch on a connection ends with its request.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// One chat request counted among those waiting or being answered, for as long as it lives.
struct Waiting<'a> {
    chats: &'a std::sync::atomic::AtomicUsize,
    /// How many there are, this one included.
    count: usize,
}

impl<'a> Waiting<'a> {
    fn enter(chats: &'a std::sync::atomic::AtomicUsize) -> Waiting<'a> {
        let count = chats.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
        Waiting { chats, count }
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.chats.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }
}

#[derive(Deserialize)]
struct ChatRequest {
    messages: Vec<Message>,
    #[serde(default)]
    stream: bool,
}

#[derive(Deserialize)]
struct Message {
    role: String,
    content: Content,
}

/// A message's content: a string, or OpenAI's list of typed parts (the text parts are taken).
#[derive(Deserialize)]
#[serde(untagged)]
enum Content {
    Text(String),
    Parts(Vec<Value>),
}

impl Content {
    fn text(&self) -> String {
        match self {
            Content::Text(s) => s.clone(),
            Content::Parts(parts) => parts.iter().filter_map(|p| p["text"].as_str()).collect::<Vec<_>>().join("\n"),
        }
    }
}

struct Request {
    method: String,
    path: String,
    host: Option<String>,
    bearer: Option<String>,
    body: Vec<u8>,
}

/// The request's head was over `MAX_LINE` or `MAX_HEAD` (answered 431).
#[derive(Debug, thiserror::Error)]
#[error("the request's headers are too large (at most {MAX_LINE} bytes a line, {MAX_HEAD} in all)")]
struct HeadTooLarge;

async fn read_request(stream: &mut BufReader<TcpStream>) -> Result<Request> {
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

async fn respond(out: &mut (impl AsyncWrite + Unpin), status: u16, body: &Value) -> Result<()> {
    let reason = match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        408 => "Request Timeout",
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

fn error_body(message: &str) -> Value {
    json!({"error": {"message": message, "type": "invalid_request_error"}})
}

fn completion(id: &str, answer: &Answer) -> Value {
    json!({
        "id": id,
        "object": "chat.completion",
        "created": now_ms() / 1000,
        "model": MODEL_ID,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": format!("{}\n\n{}", answer.text, sources_text(answer))}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": answer.stats.prompt_tokens, "completion_tokens": answer.stats.completion_tokens,
                  "total_tokens": answer.stats.prompt_tokens + answer.stats.completion_tokens},
        "citations": answer.citations.iter().map(|c| json!({"number": c.number, "path": c.path, "page": c.page, "quote": c.quote})).collect::<Vec<_>>(),
    })
}

/// The cited places, one line each: "[1] /path/file.pdf, p. 3: “quote”".
fn sources_text(answer: &Answer) -> String {
    let lines: Vec<String> = answer
        .citations
        .iter()
        .map(|c| {
            let page = c.page.map(|p| format!(", p. {p}")).unwrap_or_default();
            format!("[{}] {}{page}: “{}”", c.number, c.path, c.quote)
        })
        .collect();
    format!("Sources:\n{}", lines.join("\n"))
}

/// Equal secrets, compared in time that does not depend on where they differ.
fn same_secret(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0)
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

    #[test]
    fn message_content_as_text_or_parts() {
        let m: Message = serde_json::from_str(
            r#"{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}"#,
        )
        .unwrap();
        assert_eq!(m.content.text(), "a\nb");
        let m: Message = serde_json::from_str(r#"{"role":"user","content":"q"}"#).unwrap();
        assert_eq!(m.content.text(), "q");
    }
}
