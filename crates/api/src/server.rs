//! The server: the listener, the checks on each connection in order, answers one at a time
//! with a bounded queue, and a disconnect that cancels its answer.

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use quire_engine::{Cancel, Engine, Event};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};

use crate::http::{error_body, read_request, respond, same_secret, HeadTooLarge};
use crate::openai::{completion, now_ms, stream_tail, ChatRequest, MODEL_ID};

/// Chat requests that may wait while another is answered.
pub const MAX_WAITING: usize = 4;

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
                if let Err(too_long) = quire_engine::check_question(&question) {
                    return respond(stream.get_mut(), 413, &error_body(&too_long.to_string())).await;
                }
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
        let mut streamed = String::new();
        while let Some(text) = rx.recv().await {
            streamed.push_str(&text);
            let chunk = json!({"id": id, "object": "chat.completion.chunk", "created": now_ms() / 1000, "model": MODEL_ID,
                "choices": [{"index": 0, "delta": {"role": "assistant", "content": text}, "finish_reason": null}]});
            if out.write_all(format!("data: {chunk}\n\n").as_bytes()).await.is_err() {
                cancel.cancel(); // the client went away
            }
        }
        let tail = match asking.await? {
            Ok(answer) => stream_tail(&answer, &streamed),
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
