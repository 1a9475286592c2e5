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

mod http;
mod openai;
mod server;

pub use openai::MODEL_ID;
pub use server::{fixed, EngineSource, Server, MAX_WAITING};
