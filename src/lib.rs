//! Tessera: a Redis-compatible in-memory key-value server with a durable, compacted log.
//!
//! ```text
//!   socket bytes ──► resp (frames) ──► server (event loop, sessions)
//!                                         │ execute
//!                                         ▼
//!                        commands (table + handlers) ──► keyspace (slots, values, expiry)
//!                                         │ propagate (deterministic records)
//!                                         ▼
//!                         log (manifest, writer thread, group commit) ──► disk
//!   start-up: config ──► recovery (replay the log) ──► server
//! ```
//!
//! See ARCHITECTURE.md for the flows in prose.

pub mod access;
pub mod acl;
pub mod client_buffers;
pub mod clock;
pub mod command_stats;
pub mod commands;
pub mod compaction;
pub mod config;
pub mod crash_report;
pub mod digest;
pub mod effects;
pub mod engine;
#[cfg(feature = "fault-injection")]
pub mod fuzz_targets;
pub mod glob;
pub mod keyspace;
pub mod latency;
pub mod lazyfree;
pub mod log;
pub mod long_double;
pub mod memory;
pub mod monitor;
pub mod net;
pub mod notify;
pub mod pause;
pub mod process;
pub mod pubsub;
pub mod rdb;
pub mod recovery;
pub mod redaction;
pub mod replication;
pub mod reply_buffer;
pub mod resp;
pub mod scripting;
pub mod server;
pub mod server_log;
pub mod shutdown;
pub mod slowlog;
pub mod snapshot;
pub mod stats;
pub mod storage;
pub mod tracking;
pub mod types;
