//! Periodic work, `hz` times a second (Redis's `serverCron`): the log's health, INFO's
//! sampled figures, active expiry, eviction that commands left unfinished, jobs that are
//! due, idle clients, reply buffers' sizes.

use super::pace::Signals;
use super::{Server, release_watermark};
use crate::reply_buffer::Resize;
use crate::storage::Rate;
use std::time::Duration;

/// Time the active expiry cycle may take per cron run, as Redis's 25 % of a 100 ms tick.
const EXPIRE_CYCLE_BUDGET: Duration = Duration::from_millis(25);

impl Server {
    pub(super) fn cron(&mut self) {
        if self.listeners.take_retry() {
            (0..self.listeners.len()).for_each(|index| self.accept(index));
        }
        let now_ms = crate::clock::unix_ms();
        // DEBUG PAUSE-CRON stops what Redis's serverCron does (sampling, replication's
        // cron, expiry, eviction, the tracking table's limit, automatic jobs, idle
        // clients); the log's health and the release of durable replies go on, since
        // nothing else would release them.
        let paused = self.engine.state.cron_paused;
        if !paused {
            self.engine.state.stats.sample(now_ms);
        }
        let now = std::time::Instant::now();
        if !paused && self.replication_cron_due <= now {
            // Once a second, as Redis's replicationCron (a late tick is not caught up).
            self.replication_cron_due = (self.replication_cron_due + Duration::from_secs(1))
                .max(now + Duration::from_millis(500));
            self.replication_cron();
        }
        let state = &mut self.engine.state;
        if let Some(writer) = &self.log_writer {
            let error = writer.error();
            if error.is_some() != state.log_error.is_some() {
                match &error {
                    Some(e) => tracing::warn!(
                        "refusing writes: the append-only log can't be written ({e})"
                    ),
                    None => tracing::info!("append-only log healthy again"),
                }
            }
            state.log_error = error;
            state.persistence.aof_current_size = self.closed_log_bytes + writer.file_bytes();
            state.persistence.aof_pending_bytes = writer.pending_bytes();
            state.persistence.aof_buffered_bytes = writer.buffered_bytes();
            state.persistence.aof_delayed_fsync = writer.delayed_fsyncs();
            let durable = release_watermark(writer, state.config.appendfsync);
            if !self.held.is_empty() {
                self.release_held(durable, writer.is_failing());
            }
        }
        self.pace_background_jobs();
        if paused {
            self.serve_blocked();
            self.start_scheduled_jobs();
            self.end_of_turn();
            return;
        }
        let limits = self.engine.state.config.output_buffer_limits;
        let mut host =
            super::session::SessionsView::new(&mut self.clients, None, &mut self.touched, limits);
        self.engine.active_expire_cycle(
            &mut self.expire_cursor,
            now_ms,
            EXPIRE_CYCLE_BUDGET,
            &mut host,
        );
        self.engine
            .expire_replica_keys(now_ms, EXPIRE_CYCLE_BUDGET, &mut host);
        crate::access::set_now(now_ms);
        self.engine.eviction_cron(&mut host);
        // Also when idle, so that a lowered tracking-table-max-keys takes effect.
        self.engine.limit_tracking_table(None, &mut host);
        // Clients blocked on keys that expired or were evicted above (a stream's readers
        // are told it is gone).
        self.serve_blocked();
        // Jobs scheduled while nothing was running (BGREWRITEAOF inside EXEC).
        self.start_scheduled_jobs();
        self.automatic_jobs();
        self.close_idle_clients();
        self.resize_reply_buffers(now_ms);
        // Expiry DELs are log records too.
        self.end_of_turn();
    }

    /// The rate of the background jobs' writers until the next tick: the pacer's
    /// (`aof-rewrite-adaptive-rate`), capped by `aof-rewrite-max-rate`.
    fn pace_background_jobs(&mut self) {
        let state = &mut self.engine.state;
        let configured = Rate::from_config(state.config.aof_rewrite_max_rate);
        let rate = if state.config.aof_rewrite_adaptive_rate {
            configured.min(self.pacer.tick(&Signals {
                loop_idle: self.loop_idle,
                job_running: self.jobs.running(),
                used_memory: &crate::stats::allocated_bytes,
                log_bytes: state.persistence.aof_current_size,
            }))
        } else {
            configured
        };
        self.jobs.rate.set(rate);
        state.persistence.background_rate = rate;
    }

    /// Redis's `clientsCronResizeOutputBuffer`: each client's reply buffer follows its
    /// peak (`reply_buffer`), and an output with nothing pending is refitted to it. A
    /// replica's output is the replication stream, sized by its own rules.
    fn resize_reply_buffers(&mut self, now_ms: i64) {
        let state = &mut self.engine.state;
        let settings = state.reply_buffer;
        for (_, client) in self.clients.iter_mut() {
            if client.conn.replica.is_some() {
                continue;
            }
            let pending = client.output.len();
            match client.conn.reply_sizing.visit(pending, now_ms, &settings) {
                Some(Resize::Shrunk) => state.stats.reply_buffer_shrinks += 1,
                Some(Resize::Expanded) => state.stats.reply_buffer_expands += 1,
                None => {}
            }
            if pending == 0 {
                client.conn.reply_sizing.fit(&mut client.output);
            }
        }
    }

    /// `timeout`: closes clients idle for longer. A client waiting for its replies to
    /// become durable, blocked, held by CLIENT PAUSE, monitoring or subscribed is not
    /// idle.
    fn close_idle_clients(&mut self) {
        let config = &self.engine.state.config;
        if config.timeout_seconds == 0 {
            return;
        }
        let limit = Duration::from_secs(config.timeout_seconds);
        let durable = self
            .log_writer
            .as_ref()
            .map_or(0, |w| release_watermark(w, config.appendfsync));
        let idle: Vec<usize> = self
            .clients
            .iter()
            .filter(|(_, c)| {
                c.conn.last_interaction.elapsed() > limit
                    && c.conn.hold_seq <= durable
                    && c.conn.blocked.is_none()
                    // As Redis: no timeout for clients held by CLIENT PAUSE, monitors and
                    // subscribers.
                    && c.conn.postponed.is_none()
                    && !c.state.modes.monitor
                    && !c.state.subscriptions.any()
                    // Nor replicas, nor the master's link: `repl-timeout` is theirs.
                    && !c.state.replica
                    && !c.state.master_link
            })
            .map(|(t, _)| t)
            .collect();
        for token in idle {
            self.close_client(token);
        }
    }
}
