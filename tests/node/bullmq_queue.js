// A real job queue, BullMQ (Node.js), end to end against a running server, with the
// server killed -9 and restarted mid-run.
//
// Usage: node bullmq_queue.js PORT
//
// Driven by a harness (tests/job_queue.rs) over stdin and stdout, with the protocol of
// tests/python/queue_harness.py:
//   - phase 1: WORKERS worker processes (bullmq_worker.js, separate OS processes); jobs
//     added with Queue.add, each completion received as a `completed` event by a
//     QueueEvents listener (BullMQ's events stream, read with XREAD BLOCK), and every
//     result read back with Job.fromId and checked.
//   - phase 2: jobs added one after another. A job is acknowledged when Queue.add()
//     resolved: the server answered the script that created it (under `appendfsync
//     always`, only once that write was on disk). Once BEFORE_KILL are acknowledged and
//     FINISHED_BEFORE_KILL finished, the script asks for the kill ("bullmq_queue: kill
//     the server now") and goes on adding; the harness kills the server with SIGKILL,
//     restarts it on the same directory and port and writes "restarted" on stdin.
//     Adds made while the server is down wait in ioredis's offline queue and complete
//     after the restart (they are acknowledged then). After the restart: every
//     acknowledged job must still exist; AFTER_RESTART more are added; every
//     acknowledged job must complete with its correct result (a job a worker held at
//     the kill is handed out again by BullMQ's stalled-job check).
//
// Prints "bullmq_queue: ok" and exits 0 on success; on failure prints what went wrong
// (job states, worker logs) and exits 1.
"use strict";

const path = require("path");
const fs = require("fs");
const os = require("os");
const readline = require("readline");
const { fork } = require("child_process");

let bullmq;
try {
  bullmq = require("bullmq");
} catch (e) {
  console.log(`bullmq_queue: FAILED: ${e.message}: run npm ci in tests/node (scripts/test does)`);
  process.exit(1);
}
const { Queue, QueueEvents, Job } = bullmq;

const PORT = Number(process.argv[2]);
const QUEUE = "squares";
const WORKERS = 2;
const PHASE1_JOBS = 40;
const BEFORE_KILL = 60;
const FINISHED_BEFORE_KILL = 15;
const AFTER_RESTART = 30;
const WATCHDOG_MS = 120000;

const connection = { host: "127.0.0.1", port: PORT, maxRetriesPerRequest: null };
const started = Date.now();

function log(text) {
  process.stdout.write(`bullmq_queue: ${text}\n`);
}

function sleep(ms) {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

class Failure extends Error {}

// The worker processes, restarted if one dies (as a supervisor would).
class Pool {
  constructor(logDir) {
    this.logDir = logDir;
    this.workers = [];
    this.exits = [];
  }
  start() {
    for (let i = 0; i < WORKERS; i++) this.spawn(i);
  }
  spawn(i) {
    const name = `w${i}`;
    const logFile = path.join(this.logDir, `${name}.log`);
    const out = fs.openSync(logFile, "a");
    const child = fork(path.join(__dirname, "bullmq_worker.js"), [String(PORT), QUEUE, name], {
      stdio: ["ignore", out, out, "ipc"],
    });
    child.on("exit", (code, signal) => {
      if (!this.stopping) {
        this.exits.push(`${name}: ${code ?? signal}`);
        this.spawn(i);
      }
    });
    this.workers[i] = { child, logFile };
  }
  async stop() {
    this.stopping = true;
    for (const { child } of this.workers) child.kill("SIGTERM");
    await sleep(200);
    for (const { child } of this.workers) child.kill("SIGKILL");
  }
  tails() {
    return this.workers
      .map(({ logFile }) => {
        const text = fs.existsSync(logFile) ? fs.readFileSync(logFile, "utf8") : "";
        return `--- ${path.basename(logFile)}\n${text.split("\n").slice(-15).join("\n")}`;
      })
      .join("\n");
  }
}

// Completions as QueueEvents reports them: jobId -> returnvalue.
function listen(events) {
  const completed = new Map();
  events.on("completed", ({ jobId, returnvalue }) => {
    completed.set(jobId, typeof returnvalue === "string" ? JSON.parse(returnvalue) : returnvalue);
  });
  return completed;
}

function check(n, value) {
  return value && value.n === n && value.square === n * n;
}

// Waits until every job in `ids` (id -> n) completed with its result, read from the job
// itself (`returnvalue`), whatever the events said.
async function waitForJobs(queue, ids, timeoutMs, what) {
  const end = Date.now() + timeoutMs;
  let pending = [...ids.keys()];
  while (pending.length) {
    const still = [];
    for (const id of pending) {
      let job;
      try {
        job = await Job.fromId(queue, id);
      } catch (e) {
        still.push(id);
        continue;
      }
      if (!job) throw new Failure(`${what}: acknowledged job ${id} is gone`);
      if (job.failedReason) throw new Failure(`${what}: job ${id} failed: ${job.failedReason}`);
      if (job.finishedOn && job.returnvalue !== undefined && job.returnvalue !== null) {
        if (!check(ids.get(id), job.returnvalue)) {
          throw new Failure(`${what}: job ${id} returned ${JSON.stringify(job.returnvalue)}`);
        }
      } else {
        still.push(id);
      }
    }
    pending = still;
    if (pending.length && Date.now() > end) {
      const states = [];
      for (const id of pending.slice(0, 10)) {
        const job = await Job.fromId(queue, id).catch(() => null);
        states.push(`${id}: ${job ? await job.getState() : "missing"}`);
      }
      throw new Failure(
        `${what}: ${pending.length} of ${ids.size} jobs unfinished after ${timeoutMs / 1000} s: ${states.join(", ")}`,
      );
    }
    if (pending.length) await sleep(200);
  }
}

async function phase1(queue, completed) {
  const t0 = Date.now();
  const ids = new Map();
  for (let n = 0; n < PHASE1_JOBS; n++) {
    const job = await queue.add("square", { n });
    ids.set(job.id, n);
  }
  await waitForJobs(queue, ids, 30000, "phase 1");
  // The events stream reported every completion with the right value.
  const deadline = Date.now() + 10000;
  while ([...ids.keys()].some((id) => !completed.has(id)) && Date.now() < deadline) {
    await sleep(100);
  }
  for (const [id, n] of ids) {
    if (!completed.has(id)) throw new Failure(`phase 1: no completed event for job ${id}`);
    if (!check(n, completed.get(id))) {
      throw new Failure(`phase 1: event for job ${id} says ${JSON.stringify(completed.get(id))}`);
    }
  }
  log(`phase 1: ${PHASE1_JOBS} jobs done, events and results checked in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
}

async function phase2(queue, restarted) {
  const acknowledged = new Map();
  let n = 1000;
  let killAsked = false;
  let finished = 0;
  const adds = [];
  // Adds go on one after another until the kill was asked and the restart is confirmed.
  while (!killAsked || !restarted.done) {
    const mine = n++;
    const add = queue.add("square", { n: mine }).then(
      (job) => acknowledged.set(job.id, mine),
      () => {},
    );
    if (killAsked) {
      adds.push(add); // resolves after the restart (ioredis's offline queue)
      await Promise.race([add, sleep(50)]);
    } else {
      await add;
    }
    if (!killAsked && acknowledged.size >= BEFORE_KILL) {
      finished = await queue.getCompletedCount();
      if (finished >= FINISHED_BEFORE_KILL) {
        const counts = await queue.getJobCounts();
        log(`${acknowledged.size} acknowledged, counts ${JSON.stringify(counts)}`);
        log("kill the server now");
        killAsked = true;
      }
    }
  }
  await Promise.all(adds);
  const before = new Map(acknowledged);
  // Every job acknowledged before the restart is still there.
  const missing = [];
  for (const id of before.keys()) {
    const job = await Job.fromId(queue, id);
    if (!job) missing.push(id);
  }
  if (missing.length) throw new Failure(`after the restart: acknowledged jobs lost: ${missing.slice(0, 20)}`);
  const counts = await queue.getJobCounts();
  log(`restarted: all ${before.size} acknowledged jobs are there ${JSON.stringify(counts)}`);
  for (let i = 0; i < AFTER_RESTART; i++) {
    const mine = n++;
    const job = await queue.add("square", { n: mine });
    acknowledged.set(job.id, mine);
  }
  await waitForJobs(queue, acknowledged, 60000, "phase 2");
  log(`phase 2: all ${acknowledged.size} acknowledged jobs completed with correct results`);
}

async function main() {
  const watchdog = setTimeout(() => {
    log(`FAILED: still running after ${WATCHDOG_MS / 1000} s`);
    process.exit(1);
  }, WATCHDOG_MS);
  const restarted = { done: false };
  const input = readline.createInterface({ input: process.stdin });
  input.on("line", (line) => {
    if (line.trim() === "restarted") restarted.done = true;
  });
  const logDir = fs.mkdtempSync(path.join(os.tmpdir(), "bullmq-queue-logs-"));
  const queue = new Queue(QUEUE, { connection });
  queue.on("error", () => {}); // reconnects by itself during the restart
  const events = new QueueEvents(QUEUE, { connection });
  events.on("error", () => {});
  const pool = new Pool(logDir);
  let ok = false;
  try {
    await queue.obliterate({ force: true });
    await events.waitUntilReady();
    const completed = listen(events);
    pool.start();
    await phase1(queue, completed);
    await phase2(queue, restarted);
    ok = true;
  } catch (e) {
    log(`FAILED: ${e instanceof Failure ? e.message : e.stack}`);
    log(`worker exits: ${JSON.stringify(pool.exits)}\n${pool.tails()}`);
  }
  await pool.stop();
  await Promise.race([Promise.all([queue.close(), events.close()]), sleep(2000)]);
  clearTimeout(watchdog);
  if (ok) log(`ok`);
  log_done(ok, started);
  process.exit(ok ? 0 : 1);
}

function log_done(ok, since) {
  process.stderr.write(`bullmq_queue: ${ok ? "passed" : "failed"} in ${((Date.now() - since) / 1000).toFixed(1)} s\n`);
}

main();
