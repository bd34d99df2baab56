// A BullMQ worker process of bullmq_queue.js: `node bullmq_worker.js PORT QUEUE NAME`.
//
// Each job `square` returns {n, square: n * n} after a little work (so that jobs are in
// flight when the server is killed). The worker's locks are short and the stalled-job
// check frequent, so that a job taken before a kill -9 is handed out again within
// seconds rather than the default 30 s; a job may stall several times across one
// restart, so the stalled count that fails a job is raised. BullMQ (through ioredis)
// reconnects on its own after the restart.
"use strict";

const { Worker } = require("bullmq");

const [port, queueName, name] = process.argv.slice(2);

// Dies with its parent, as the Python harness's workers do (no orphan after a failed run).
process.on("disconnect", () => process.exit(1));
setInterval(() => {
  if (process.ppid === 1) process.exit(1);
}, 500).unref();

const worker = new Worker(
  queueName,
  async (job) => {
    await new Promise((resolve) => setTimeout(resolve, 10));
    const n = job.data.n;
    return { n, square: n * n };
  },
  {
    connection: { host: "127.0.0.1", port: Number(port), maxRetriesPerRequest: null },
    concurrency: 2,
    lockDuration: 3000,
    stalledInterval: 1000,
    maxStalledCount: 20,
    name,
  },
);
worker.on("error", (err) => {
  // Connection errors while the server restarts: BullMQ retries by itself.
  process.stderr.write(`${name}: worker error: ${err.message}\n`);
});
worker.on("failed", (job, err) => {
  process.stderr.write(`${name}: job ${job && job.id} failed: ${err && err.message}\n`);
});
process.on("SIGTERM", async () => {
  await worker.close();
  process.exit(0);
});
