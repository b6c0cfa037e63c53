//! The pipeline under faults through real peers on 127.0.0.1: the completer's database
//! connection killed mid-commit (PostgreSQL), a slow failing source, and retention after a
//! crash left stray objects beside the artifact.

use crate::common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use common::peers::{HttpRule, Receiver};
use common::{Project, TestLedger, jk, run_date};
use dawnpost::Config;
use dawnpost::domain::outcome::ResponseClass;
use dawnpost::ledger::{Audit, Via};
use dawnpost::ledger::{DeliveryState, JobState};
use dawnpost::node::runner::RunOnceSummary;
use dawnpost::report::artifact::ArtifactStore;
use dawnpost::services::sweeper::{Sweeper, SweeperConfig};

const DATE: &str = "2026-11-30";

fn project(reports: &str, extra: &str) -> Project {
    let p = Project::new(reports);
    p.write(
        "config/dawnpost.toml",
        &format!(
            "[pool]\nconcurrency = 8\nadmission_per_second = 1000\nlease = \"30s\"\ndrain_timeout = \"5s\"\n[retry]\nbase = \"2s\"\ncap = \"4s\"\nmax_attempts = 5\n{extra}"
        ),
    );
    p
}

fn report(id: &str, source: &str, hooks: &[String]) -> String {
    let mut s = format!(
        "[[report]]\nid = \"{id}\"\ntitle = \"Report {id}\"\nschedule = \"0 30 6 * * *\"\ntimezone = \"Europe/Berlin\"\ntemplate = \"daily_ops\"\nsource = {source}\nsample = \"config/sample/warehouse-17.json\"\n"
    );
    for url in hooks {
        s.push_str(&format!("[[report.webhook]]\nurl = \"{url}\"\n"));
    }
    s
}

const FILE_SOURCE: &str = "{ kind = \"file\", path = \"config/sample/warehouse-17.json\" }";

async fn run(p: &Project, t: &TestLedger, max_wait: Duration) -> RunOnceSummary {
    let config = Config::load(&p.config_dir(), &dawnpost::delivery::readers())
        .unwrap_or_else(|e| panic!("{e}"));
    run_date(&config, &t.ledger, DATE, max_wait).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_cut_by_a_killed_backend_is_retried_without_resending() {
    let Some(t) = TestLedger::postgres().await else {
        common::skip(&format!("{} is not set", common::POSTGRES_ENV));
        return;
    };
    let url = std::env::var(common::POSTGRES_ENV).expect("url");
    let admin = sqlx::PgPool::connect(&url).await.expect("admin");
    let schema = t.schema().expect("a postgres schema");
    // The first attempt row (the completer's batch) stalls inside its transaction, so
    // the test can kill that backend mid-commit. A sequence, not a flag row: the kill rolls
    // back the transaction, and the retry must not stall again.
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "CREATE SEQUENCE {schema}.stall_once;
         CREATE FUNCTION {schema}.stall_first_batch() RETURNS trigger AS $$
         BEGIN
           IF nextval('{schema}.stall_once') = 1 THEN PERFORM pg_sleep(30); END IF;
           RETURN NULL;
         END $$ LANGUAGE plpgsql;
         CREATE TRIGGER stall_first_batch AFTER INSERT ON {schema}.delivery_attempts
           FOR EACH ROW EXECUTE FUNCTION {schema}.stall_first_batch();"
    )))
    .execute(&admin)
    .await
    .expect("trigger");

    let rule: HttpRule = Arc::new(|_: &str, _, _| (204, None, Duration::ZERO));
    let rx = Receiver::start(rule).await;
    let hooks: Vec<String> = (0..12).map(|i| rx.url(&format!("k{i}"))).collect();
    let p = project(&report("kill", FILE_SOURCE, &hooks), "");

    let killed = Arc::new(AtomicUsize::new(0));
    let killer = {
        let killed = killed.clone();
        tokio::spawn(async move {
            loop {
                let n: Option<(i64,)> = sqlx::query_as(
                    "SELECT COUNT(pg_terminate_backend(pid)) FROM pg_stat_activity
                     WHERE wait_event = 'PgSleep' AND query LIKE '%delivery_attempts%'
                     HAVING COUNT(*) > 0",
                )
                .fetch_optional(&admin)
                .await
                .expect("terminate");
                if let Some((n,)) = n {
                    killed.fetch_add(usize::try_from(n).unwrap_or(0), Ordering::SeqCst);
                    return;
                }
                tokio::task::yield_now().await;
            }
        })
    };
    let summary = run(&p, &t, Duration::from_secs(60)).await;
    killer.abort();
    assert_eq!(
        killed.load(Ordering::SeqCst),
        1,
        "the completer's backend was killed mid-batch"
    );
    assert_eq!(summary.exit_code, 0, "{summary:?}");
    for i in 0..12 {
        assert_eq!(
            rx.hits_for(&format!("k{i}")).len(),
            1,
            "k{i}: zero re-sends"
        );
    }
    let deliveries = t
        .ledger
        .deliveries()
        .list(&jk(&format!("kill:{DATE}")))
        .await
        .expect("deliveries");
    assert_eq!(deliveries.len(), 12);
    for d in &deliveries {
        assert_eq!((d.state, d.attempts), (DeliveryState::Sent, 1), "{}", d.key);
        let attempts = t
            .ledger
            .deliveries()
            .attempts(&d.key)
            .await
            .expect("attempts");
        assert_eq!(attempts.len(), 1, "{}: one attempt row", d.key);
        assert_eq!(attempts[0].class, ResponseClass::Accepted);
    }
    t.cleanup().await;
}

/// An HTTP source that fails slowly: 503 after 1.5 s.
async fn slow_failing_source(hits: Arc<AtomicUsize>) -> std::net::SocketAddr {
    let app = axum::Router::new().route(
        "/data",
        axum::routing::get(move || {
            let hits = hits.clone();
            async move {
                hits.fetch_add(1, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(1500)).await;
                axum::http::StatusCode::SERVICE_UNAVAILABLE
            }
        }),
    );
    crate::common::peers::serve(app).await
}

async fn a_failed_render_waits_its_backoff_from_the_failure(t: &TestLedger) {
    let hits = Arc::new(AtomicUsize::new(0));
    let addr = slow_failing_source(hits.clone()).await;
    let source = format!("{{ kind = \"http\", url = \"http://{addr}/data\", timeout = \"10s\" }}");
    let p = project(&report("slow", &source, &[]), "");
    // Waits 2.5 s: the failure comes at 1.5 s and its retry is due 1.6-2 s after it.
    let summary = run(&p, t, Duration::from_millis(2500)).await;
    assert_eq!(summary.exit_code, 4, "still pending: {summary:?}");
    assert_eq!(hits.load(Ordering::SeqCst), 1, "no immediate retry");
    let job = t
        .ledger
        .jobs()
        .get(&jk(&format!("slow:{DATE}")))
        .await
        .expect("get")
        .expect("job");
    assert_eq!(job.state, JobState::Ready);
    let wait = job.ready_at - job.updated_at;
    assert!(
        wait >= chrono::Duration::milliseconds(1600),
        "the backoff (2 s, jittered down at most 20%) counts from the failure: {wait}"
    );
}

/// A file source on a file system that never answers (here a pipe nobody writes to, whose
/// open waits for a writer) is cut at the work deadline, and the job waits for its retry with
/// the reason.
async fn a_file_source_that_never_answers_is_cut_at_the_deadline(t: &TestLedger) {
    let source = "{ kind = \"file\", path = \"config/sample/stuck.json\" }";
    let p = Project::new(&report("stuck", source, &[]));
    p.write(
        "config/dawnpost.toml",
        "[pool]\nconcurrency = 2\nlease = \"1s\"\ndrain_timeout = \"1s\"\n[retry]\nbase = \"30s\"\n",
    );
    // Valid when the configuration is loaded (which reads it), stuck when the job renders.
    p.write("config/sample/stuck.json", "{}");
    let config = Config::load(&p.config_dir(), &dawnpost::delivery::readers())
        .unwrap_or_else(|e| panic!("{e}"));
    let fifo = p.root().join("config/sample/stuck.json");
    std::fs::remove_file(&fifo).expect("remove");
    let made = std::process::Command::new("mkfifo").arg(&fifo).status();
    assert!(made.is_ok_and(|s| s.success()), "mkfifo");
    let summary = run_date(&config, &t.ledger, DATE, Duration::from_secs(4)).await;
    // Whatever happens below, the stuck read ends: a writer opens the pipe and closes it.
    let _ = std::fs::OpenOptions::new().write(true).open(&fifo);
    assert_eq!(summary.exit_code, 4, "still pending: {summary:?}");
    let job = t
        .ledger
        .jobs()
        .get(&jk(&format!("stuck:{DATE}")))
        .await
        .expect("get")
        .expect("job");
    assert_eq!(job.state, JobState::Ready);
    let said = job.last_error.unwrap_or_default();
    assert!(
        said.contains("no data within 2s: the fetch was cut at its deadline"),
        "{said}"
    );
}

fn sweeper(p: &Project, t: &TestLedger, as_of: chrono::DateTime<chrono::Utc>) -> Sweeper {
    let config = Config::load(&p.config_dir(), &dawnpost::delivery::readers())
        .unwrap_or_else(|e| panic!("{e}"));
    let store = ArtifactStore::open("file://var/artifacts", p.root()).expect("store");
    Sweeper::new(
        t.ledger.clone(),
        store,
        Arc::new(dawnpost::ManualClock::new(as_of)),
        SweeperConfig::new(config.dir.join("retention.toml")),
        config.retention.clone(),
    )
}

async fn a_redrive_after_retention_renders_the_same_bytes_and_no_orphan_survives(t: &TestLedger) {
    // The receiver is gone (410) on the first day, then back.
    let rule: HttpRule =
        Arc::new(|_: &str, nth, _| (if nth == 1 { 410 } else { 204 }, None, Duration::ZERO));
    let rx = Receiver::start(rule).await;
    let p = project(&report("again", FILE_SOURCE, &[rx.url("gone")]), "");
    let first = run(&p, t, Duration::from_secs(30)).await;
    assert_eq!(first.exit_code, 3, "quarantined: {first:?}");
    let key = jk(&format!("again:{DATE}"));
    let job = t.ledger.jobs().get(&key).await.expect("get").expect("job");
    let sha = job.artifact.clone().expect("artifact").sha256;
    let store = ArtifactStore::open("file://var/artifacts", p.root()).expect("store");
    assert_eq!(store.count_files("again", DATE).await.expect("count"), 3);

    // A crash left a staging file and a stray render beside the recorded parts (HTML, text, CSV).
    let dir = p.root().join("var/artifacts/again").join(DATE);
    std::fs::write(dir.join(format!("{sha}.txt#1")), "partial").expect("staging");
    std::fs::write(dir.join("0000.txt"), "stray").expect("stray");
    assert_eq!(store.count_files("again", DATE).await.expect("count"), 5);

    // Ten days on the artifact class is due (7d): everything under the job's prefix goes.
    let terminal = job.terminal_at.expect("terminal");
    let counts = sweeper(&p, t, terminal + chrono::Duration::days(10))
        .run_once()
        .await
        .expect("sweep");
    assert_eq!(counts.artifacts_deleted, 1);
    assert_eq!(
        store.count_files("again", DATE).await.expect("count"),
        0,
        "no orphan left"
    );

    // Redriven, the job renders again from the same data: the same bytes, the same sha256.
    t.ledger
        .jobs()
        .redrive(
            &key,
            &Audit::new("ops", "receiver is back", Via::Cli).expect("audited"),
            chrono::Utc::now(),
        )
        .await
        .expect("redrive");
    let second = run(&p, t, Duration::from_secs(30)).await;
    assert_eq!(second.exit_code, 0, "{second:?}");
    let again = t.ledger.jobs().get(&key).await.expect("get").expect("job");
    assert_eq!(
        again.artifact.expect("artifact").sha256,
        sha,
        "byte-identical"
    );
    assert_eq!(store.count_files("again", DATE).await.expect("count"), 3);
    let hits = rx.hits_for("gone");
    assert_eq!(hits.len(), 2);
    assert_eq!(
        hits[0].body, hits[1].body,
        "the receiver got the same report twice"
    );
}

/// A report `id` with `webhooks` webhooks to a receiver that answers each after `answer_in`, on
/// a pool of one slot with a lease of `lease`.
async fn one_slot(
    id: &str,
    webhooks: usize,
    answer_in: Duration,
    lease: &str,
) -> (Receiver, Project) {
    let rule: HttpRule = Arc::new(move |_: &str, _, _| (204, None, answer_in));
    let rx = Receiver::start(rule).await;
    let hooks: Vec<String> = (0..webhooks).map(|i| rx.url(&format!("{id}{i}"))).collect();
    let p = Project::new(&report(id, FILE_SOURCE, &hooks));
    p.write(
        "config/dawnpost.toml",
        &format!("[pool]\nconcurrency = 1\nadmission_per_second = 1000\nlease = \"{lease}\"\ndrain_timeout = \"5s\"\n"),
    );
    (rx, p)
}

/// The pool claims ahead of its free slots; claimed work that waits a third of its lease for a
/// slot (here: one slot, a 3 s lease, a receiver that takes 1.5 s) goes back to the shared
/// queue unstarted and is claimed again later. Giving it back counts nothing: every delivery
/// ends sent with one attempt, and one attempt row, though some were claimed several times.
async fn claimed_work_that_waits_too_long_goes_back_uncounted(t: &TestLedger) {
    let (rx, p) = one_slot("queued", 4, Duration::from_millis(1500), "3s").await;
    let summary = run(&p, t, Duration::from_secs(60)).await;
    assert_eq!(summary.stats.sent, 4, "{summary:?}");
    let deliveries = (t.ledger)
        .deliveries()
        .list(&jk(&format!("queued:{DATE}")))
        .await
        .expect("list");
    assert_eq!(deliveries.len(), 4);
    for d in &deliveries {
        assert_eq!(d.state, DeliveryState::Sent, "{}", d.key);
        assert_eq!(
            d.attempts, 1,
            "{}: giving it back counted an attempt",
            d.key
        );
        let attempts = t
            .ledger
            .deliveries()
            .attempts(&d.key)
            .await
            .expect("attempts");
        assert_eq!(attempts.len(), 1, "{}", d.key);
        assert_eq!(attempts[0].class, ResponseClass::Accepted, "{}", d.key);
    }
    assert!(
        deliveries.iter().any(|d| d.lease_token > 1),
        "no delivery waited long enough to go back: {:?}",
        deliveries.iter().map(|d| d.lease_token).collect::<Vec<_>>()
    );
    assert_eq!(rx.hits().len(), 4, "each sent once");
}

/// A node whose clock turns out to be far off the ledger's (here: its clock follows a reading
/// two hours behind its wall clock while it works) starts nothing more of what it had claimed:
/// the queued deliveries go back unstarted, uncounted, while the one send already under way
/// finishes and is recorded.
async fn a_node_whose_clock_is_refused_gives_its_queued_work_back(t: &TestLedger) {
    let (rx, p) = one_slot("skewed", 6, Duration::from_secs(3), "30s").await;
    let config = Config::load(&p.config_dir(), &dawnpost::delivery::readers())
        .unwrap_or_else(|e| panic!("{e}"));
    let clock = Arc::new(dawnpost::domain::clock::LedgerClock::new(Arc::new(
        dawnpost::SystemClock,
    )));
    let cancel = tokio_util::sync::CancellationToken::new();
    let (ledger, shared) = (t.ledger.clone(), clock.clone() as dawnpost::SharedClock);
    let stop = cancel.clone();
    let run = tokio::spawn(async move {
        let wait = Duration::from_secs(60);
        common::run_date_on(&config, &ledger, DATE, wait, shared, stop).await
    });
    // One send under way (one slot, the receiver takes 3 s) and more claimed into the queue
    // behind it: all `sending` in the ledger.
    rx.wait_for(1, Duration::from_secs(30)).await;
    let job = jk(&format!("skewed:{DATE}"));
    let sending = |list: &[dawnpost::ledger::Delivery]| {
        (list.iter())
            .filter(|d| d.state == DeliveryState::Sending)
            .count()
    };
    for _ in 0..100 {
        let list = t.ledger.deliveries().list(&job).await.expect("list");
        if sending(&list) >= 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let list = t.ledger.deliveries().list(&job).await.expect("list");
    assert!(sending(&list) >= 2, "one send under way and more queued");
    let now = std::time::Instant::now();
    clock.follow(chrono::Utc::now() - chrono::Duration::hours(2), now, now);
    let mut settled = Vec::new();
    for _ in 0..300 {
        settled = t.ledger.deliveries().list(&job).await.expect("list");
        if settled.iter().all(|d| d.state != DeliveryState::Sending) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    cancel.cancel();
    let _ = run.await;
    assert_eq!(settled.len(), 6);
    let (mut sent, mut given_back) = (0, 0);
    for d in &settled {
        let attempts = t
            .ledger
            .deliveries()
            .attempts(&d.key)
            .await
            .expect("attempts");
        match d.state {
            DeliveryState::Sent => {
                assert_eq!(attempts.len(), 1, "{}", d.key);
                sent += 1;
            }
            DeliveryState::Pending => {
                assert_eq!(
                    d.attempts, 0,
                    "{}: giving it back counted an attempt",
                    d.key
                );
                assert!(attempts.is_empty(), "{}", d.key);
                // Claimed once (its token moved) and given back; the rest were never claimed.
                given_back += usize::from(d.lease_token > 0);
            }
            other => panic!("{}: {other:?}", d.key),
        }
    }
    assert_eq!(
        sent, 1,
        "only the send under way when the clock was refused went out"
    );
    assert!(given_back >= 1, "nothing claimed was given back");
    assert_eq!(rx.hits().len(), 1, "nothing given back was sent");
}

on_both_backends!(
    a_file_source_that_never_answers_is_cut_at_the_deadline,
    a_node_whose_clock_is_refused_gives_its_queued_work_back,
    claimed_work_that_waits_too_long_goes_back_uncounted,
    a_failed_render_waits_its_backoff_from_the_failure,
    a_redrive_after_retention_renders_the_same_bytes_and_no_orphan_survives,
);
