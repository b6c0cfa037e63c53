// graphile-worker's POST job beside dawnpost (benches/pipeline.rs -- --graphile): N jobs, each
// one POST of a 6 KiB body to the bench's sink, enqueued (in batches of 1,000) while the worker
// drains them, on the bench's PostgreSQL in a schema of its own, dropped afterwards.
// Usage: node post.mjs CONNECTION_STRING SINK_URL N CONCURRENCY
// Prints one JSON line: jobs, seconds (enqueue and drain together), jobs_per_s, cpu_us_per_job.
import { Logger, makeWorkerUtils, run } from "graphile-worker";

const [connectionString, sinkUrl, nText, concurrencyText] = process.argv.slice(2);
const n = Number(nText);
const concurrency = Number(concurrencyText);
const schema = `gw_bench_${process.pid}`;
const body = "x".repeat(6 * 1024);
// Quiet: a log line per job would cost the worker CPU the sink does not see.
const logger = new Logger(() => () => {});

const utils = await makeWorkerUtils({ connectionString, schema, logger });
await utils.migrate();
let done = 0;
let finished;
const allDone = new Promise((resolve) => (finished = resolve));
const cpuBefore = process.cpuUsage();
const started = performance.now();
// Its documented batching for throughput (worker.graphile.org/docs/performance#batching): the
// pool fetches and locks 500 jobs at a time, and completions are committed together.
const preset = {
  worker: { localQueue: { size: 500 }, completeJobBatchDelay: 0, failJobBatchDelay: 0 },
};
const runner = await run({
  connectionString,
  schema,
  concurrency,
  preset,
  noHandleSignals: true,
  pollInterval: 1000,
  logger,
  taskList: {
    post: async (payload) => {
      const r = await fetch(`${sinkUrl}${payload.i % 100}`, {
        method: "POST",
        body,
        headers: { "idempotency-key": String(payload.i) },
      });
      await r.arrayBuffer();
      if (!r.ok) throw new Error(`HTTP ${r.status}`);
      if (++done === n) finished();
    },
  },
});
for (let i = 0; i < n; i += 1000) {
  const size = Math.min(1000, n - i);
  await utils.addJobs(
    Array.from({ length: size }, (_, k) => ({ identifier: "post", payload: { i: i + k } })),
  );
}
await allDone;
const seconds = (performance.now() - started) / 1000;
const cpu = process.cpuUsage(cpuBefore);
await runner.stop();
await utils.withPgClient((client) => client.query(`DROP SCHEMA ${schema} CASCADE`));
await utils.release();
console.log(
  JSON.stringify({
    jobs: n,
    seconds: Math.round(seconds * 1000) / 1000,
    jobs_per_s: Math.round(n / seconds),
    cpu_us_per_job: Math.round(((cpu.user + cpu.system) / n) * 10) / 10,
  }),
);
