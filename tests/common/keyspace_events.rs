//! A subscriber to every keyspace notification of a server, for comparing the events of
//! Tessera and Redis.

use std::time::Duration;

/// The channel a drain stops at: published after the commands whose events it collects.
const END: &str = "end-of-events";

/// A connection subscribed to every `__keyspace@…` and `__keyevent@…` channel (and to
/// `END`), with a connection of its own that publishes `END`.
pub struct Collector {
    connection: redis::Connection,
    publisher: redis::Connection,
}

impl Collector {
    pub fn new(port: u16) -> Collector {
        let client = redis::Client::open(format!("redis://127.0.0.1:{port}/")).unwrap();
        let mut connection = client.get_connection().unwrap();
        let publisher = client.get_connection().unwrap();
        {
            let mut pubsub = connection.as_pubsub();
            pubsub.psubscribe("__key*__:*").unwrap();
            pubsub.subscribe(END).unwrap();
            // Kept subscribed: the guard is forgotten rather than dropped (which would
            // unsubscribe).
            std::mem::forget(pubsub);
        }
        Collector {
            connection,
            publisher,
        }
    }

    /// Everything received until `END` arrives, as `channel payload` lines, in order.
    pub fn drain(&mut self) -> Vec<String> {
        let _: i64 = redis::cmd("PUBLISH")
            .arg(END)
            .arg("x")
            .query(&mut self.publisher)
            .unwrap();
        let mut pubsub = self.connection.as_pubsub();
        pubsub
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        let mut lines = Vec::new();
        loop {
            let message = pubsub.get_message().expect("the end marker never came");
            if message.get_channel_name() == END {
                break;
            }
            lines.push(format!(
                "{} {}",
                message.get_channel_name(),
                String::from_utf8_lossy(message.get_payload_bytes())
            ));
        }
        std::mem::forget(pubsub);
        lines
    }
}
