//! The A2A HTTP+JSON listener, black-box over a real loopback socket: every route and
//! every error, principals kept apart, streams, shutdown. The agent is a scripted driver
//! of the plane's agent API (not Pi): what it does depends on the last message's text
//! (`common/server.rs`). One module per route or concern.

#[path = "../common/mod.rs"]
mod common;

mod auth;
mod cancel;
mod card;
mod connections;
mod errors;
mod extensions;
mod get;
mod harness;
mod list;
mod push;
mod send;
mod shutdown;
mod stream;
mod subscribe;
