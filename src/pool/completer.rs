//! Group commit of work outcomes. Work items hand their finished render or delivery attempt to
//! one task that records everything queued since its last commit — renders and attempts in one
//! transaction — and answers each item; the jobs those attempts finished are settled in the
//! next batch's transaction, or in a statement of their own when no batch follows at once.
//! Alone, an outcome is recorded at once; under load the completer gathers up to [`GOAL`]
//! outcomes for at most [`LINGER`], and one commit carries tens of outcomes, so the ledger's
//! cost per item falls as the load rises instead of capping it. A commit that fails is tried
//! again until it goes through (see [`until_committed`]): one lost connection must not turn a
//! batch of finished sends into expired leases that the rescuer would send again. A render's
//! deliveries are created in its commit leased to this node, and its answer carries them
//! ([`Born`]) to the pool's queue. The pool's claims ride the same commits
//! ([`Completion::Claim`]): a claim is taken after the outcomes, in the commit the gathering
//! ends with (one the pool has nothing left to start for ends it at once), so a busy node's
//! claims cost no commit of their own and cut no batch short.

use std::collections::BTreeSet;
use std::sync::Arc;

use std::future::Future;
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use crate::domain::clock::SharedClock;
use crate::domain::keys::JobKey;
use crate::ledger::{Claimed, DeliveryNext, Finish, LeaseTo, LeasedDelivery, Ledger, LedgerError};
use crate::ledger::{GroupCommit, Render};

/// The most outcomes one commit records.
pub(super) const MAX_BATCH: usize = 256;

/// How an outcome was recorded: `LeaseLost` when the lease was no longer held, another error
/// when its whole batch failed (nothing of that batch was recorded).
pub(super) type Recorded = Result<(), Arc<LedgerError>>;

/// How a render was recorded: when it was, the deliveries it created, leased to this node.
pub(super) type RenderRecorded = Result<Born, Arc<LedgerError>>;

/// The deliveries a recorded render created, leased to this node by the commit that recorded
/// it, and the instant before that commit was asked for (their leases run at least from then).
#[derive(Debug)]
pub(super) struct Born {
    pub(super) deliveries: Vec<LeasedDelivery>,
    pub(super) asked: tokio::time::Instant,
}

/// What a claim took, and the instant before the commit that took it was asked for (its leases
/// run at least from then); the batch's error when it failed.
pub(super) type ClaimAnswer = Result<(Claimed, tokio::time::Instant), Arc<LedgerError>>;

/// One finished work item waiting to be recorded, or the pool's claim, which rides the next
/// commit.
pub(super) enum Completion {
    /// Claims up to `limit` due items for this node in the next commit. `urgent`: the pool has
    /// nothing queued to start, so the claim ends the gathering; else it waits for the commit
    /// the gathering ends with anyway (at most its linger), while the pool works off its queue.
    Claim {
        limit: u32,
        urgent: bool,
        reply: oneshot::Sender<ClaimAnswer>,
    },
    /// A render: the job's artifact and the deliveries it creates.
    Rendered {
        render: Render,
        reply: oneshot::Sender<RenderRecorded>,
    },
    /// A delivery attempt and what follows it.
    Finished {
        finish: Finish,
        job_key: JobKey,
        reply: oneshot::Sender<Recorded>,
    },
}

/// The first pause before a failed commit is tried again; it doubles up to [`RETRY_CAP`].
const RETRY_FIRST: Duration = Duration::from_millis(50);
const RETRY_CAP: Duration = Duration::from_secs(2);

/// Runs one batch's write until it commits. A failed commit (connection cut, server restart)
/// is tried again with backoff: the writes are fenced, so a retry of a batch that did commit
/// records nothing twice (its leases answer `LeaseLost`), and a lease really lost meanwhile
/// answers `LeaseLost` too. Gives up only once `abandon` fires (the drain's deadline passed):
/// then the leases are left to the rescuer.
async fn until_committed<T, F, Fut>(
    what: &str,
    abandon: &CancellationToken,
    write: F,
) -> crate::ledger::Result<T>
where
    F: Fn() -> Fut,
    Fut: Future<Output = crate::ledger::Result<T>>,
{
    let mut pause = RETRY_FIRST;
    let mut failures = 0u32;
    loop {
        match write().await {
            Ok(v) => {
                if failures > 0 {
                    tracing::info!(what, failures, "commit went through after retries");
                }
                return Ok(v);
            }
            Err(e) if abandon.is_cancelled() => return Err(e),
            Err(e) => {
                failures += 1;
                tracing::warn!(what, failures, error = %e, retry_in = ?pause, "commit failed; trying again");
                tokio::select! {
                    _ = abandon.cancelled() => {}
                    _ = tokio::time::sleep(pause) => {}
                }
                pause = pause.saturating_mul(2).min(RETRY_CAP);
            }
        }
    }
}

/// Records completions until every sender is gone, then returns. The jobs a batch of attempts
/// finished are settled in the next batch's transaction when one follows within [`SETTLE_WAIT`],
/// else alone: either way after their finishes committed, and never later than the next batch.
/// Renders' deliveries are created leased to `owner` for `lease_for`.
pub(super) async fn run(
    ledger: Ledger,
    clock: SharedClock,
    (owner, lease_for): (String, chrono::Duration),
    leadership: crate::runtime::leadership::Leadership,
    mut rx: mpsc::Receiver<Completion>,
    abandon: CancellationToken,
) {
    let recorder = &Recorder {
        ledger,
        clock,
        owner,
        lease_for,
    };
    let mut batch = Vec::with_capacity(MAX_BATCH);
    let mut unsettled: Vec<JobKey> = Vec::new();
    let mut busy = false;
    loop {
        // Settles ride the next batch; only a pool gone quiet pays them a commit of their own.
        if !unsettled.is_empty() {
            let next = tokio::time::timeout(SETTLE_WAIT, rx.recv_many(&mut batch, MAX_BATCH));
            let next = next.await;
            if next.is_err() {
                settle_alone(recorder, std::mem::take(&mut unsettled)).await;
            }
        }
        if batch.is_empty() && rx.recv_many(&mut batch, MAX_BATCH).await == 0 {
            break;
        }
        if busy {
            gather(&mut rx, &mut batch, gathering(leadership.live_nodes())).await;
        }
        busy = batch.len() >= BUSY;
        let mut renders = Vec::new();
        let mut finishes = Vec::new();
        let mut claim = None;
        let mut later = Vec::new();
        for completion in batch.drain(..) {
            match completion {
                // One claim a commit (the pool asks one at a time); another waits for the next.
                Completion::Claim { limit, reply, .. } if claim.is_none() => {
                    claim = Some((limit, reply))
                }
                c @ Completion::Claim { .. } => later.push(c),
                Completion::Rendered { render, reply } => renders.push((render, reply)),
                Completion::Finished {
                    finish,
                    job_key,
                    reply,
                } => finishes.push((finish, (job_key, reply))),
            }
        }
        let carried = std::mem::take(&mut unsettled);
        let outcomes = (renders, finishes, carried);
        unsettled = record(recorder, outcomes, claim, &abandon).await;
        batch.append(&mut later);
    }
    settle_alone(recorder, unsettled).await;
}

/// How long the jobs a commit finished wait for the next batch to settle them in. A busy
/// pool's next outcomes arrived while that commit ran, so they are there at once; a pool whose
/// outcomes stopped (the end of a night) settles them alone. Waiting a whole [`LINGER`] for a
/// batch that was not coming held the last jobs of a night unfinished for a tenth of a second
/// (2.5% of a 10,000-job drain).
const SETTLE_WAIT: Duration = PAUSE;

/// What the completer records with.
struct Recorder {
    ledger: Ledger,
    clock: SharedClock,
    /// Who renders' deliveries are created leased to, and for how long.
    owner: String,
    lease_for: chrono::Duration,
}

/// A batch this large says the pool is busy: the next one gathers (see [`gather`]).
const BUSY: usize = 8;

/// What a busy completer gathers before it commits: [`GOAL`] outcomes, or what arrived within
/// [`LINGER`]. One commit then carries tens of outcomes instead of the few that arrived during
/// the last commit. The items' slots are already free (see `work::hand_off`), so this delays
/// only their commit, never the work.
const GOAL: usize = 128;
const LINGER: Duration = Duration::from_millis(100);

/// What a node that shares the ledger with live others gathers: a whole batch, for up to
/// twice the linger. A lone node's commits bound its drain (the next outcomes arrive while one
/// commits), so gathering more only idles the server: a goal of 256 and a linger of 200 ms cut
/// a lone node's rate 3–6%. A node at a third of the load (three nodes) fills 128 outcomes in
/// ~50 ms and its commits add up on the shared server: gathering a whole batch took three
/// nodes' commits of a 10,000-job drain from 252–271 to 141–178 at the same rate
/// (`cargo bench --bench workers`).
const SHARED_GOAL: usize = MAX_BATCH;
const SHARED_LINGER: Duration = Duration::from_millis(200);

/// How much a busy completer gathers, with `live_nodes` sharing the ledger: (goal, linger).
fn gathering(live_nodes: usize) -> (usize, Duration) {
    match live_nodes {
        0 | 1 => (GOAL, LINGER),
        _ => (SHARED_GOAL, SHARED_LINGER),
    }
}

/// Adds to `batch` what arrives until it holds `goal` outcomes, `linger` passed, nothing
/// arrived for a [`PAUSE`], or it holds an urgent claim: the pool has nothing left to start, so
/// such a claim commits what is here at once. A claim that is not urgent rides the commit the
/// gathering ends with: the pool still has queued work, and a claim cutting every gathering
/// short would make a node at a third of the load (three nodes sharing it) commit more often
/// for the same outcomes.
async fn gather(
    rx: &mut mpsc::Receiver<Completion>,
    batch: &mut Vec<Completion>,
    (goal, linger): (usize, Duration),
) {
    let until = tokio::time::Instant::now() + linger;
    let mut seen = 0;
    while batch.len() < goal && !batch[seen..].iter().any(Completion::is_urgent_claim) {
        seen = batch.len();
        let room = goal - batch.len();
        let pause = until.min(tokio::time::Instant::now() + PAUSE);
        match tokio::time::timeout_at(pause, rx.recv_many(batch, room)).await {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
    }
}

/// A gathering ends when no outcome arrived for this long: the pool's outcomes have stopped
/// coming (the last renders of a night, whose deliveries wait for this commit to start, or
/// their last sends), and waiting on would only hold what is here. Each such gathering held
/// its outcomes a whole [`LINGER`]: two or three a 10,000-job drain, at its start and its end
/// (timing each gathering of `cargo bench --bench pipeline`). A node
/// gathering at a third of the load still sees an outcome every millisecond or so.
const PAUSE: Duration = Duration::from_millis(5);

impl Completion {
    fn is_urgent_claim(&self) -> bool {
        matches!(self, Completion::Claim { urgent: true, .. })
    }
}

/// Settles `keys` in a statement of its own (a failure is left to the rescuer).
async fn settle_alone(r: &Recorder, keys: Vec<JobKey>) {
    if keys.is_empty() {
        return;
    }
    let keys: Vec<&JobKey> = keys.iter().collect();
    if let Err(e) = r.ledger.jobs().settle_many(&keys, r.clock.now()).await {
        tracing::warn!(jobs = keys.len(), error = %e, "could not settle jobs; the rescuer settles them later");
    }
}

/// Sends each waiting item its result; an item that went away (its lease was lost meanwhile)
/// needs no answer.
fn answer(replies: Vec<oneshot::Sender<Recorded>>, results: Vec<Recorded>) {
    for (reply, result) in replies.into_iter().zip(results) {
        let _ = reply.send(result);
    }
}

/// Sends each render its result with the deliveries it created. The deliveries of a render
/// whose work item went away (the pool was cut at shutdown) go back unstarted at once, instead
/// of waiting out a lease that nobody holds.
async fn answer_renders(
    r: &Recorder,
    replies: Vec<oneshot::Sender<RenderRecorded>>,
    results: Vec<Result<Vec<LeasedDelivery>, Arc<LedgerError>>>,
    asked: tokio::time::Instant,
) {
    for (reply, result) in replies.into_iter().zip(results) {
        let answer = result.map(|deliveries| Born { deliveries, asked });
        if let Err(Ok(born)) = reply.send(answer) {
            let unclaimed = Claimed {
                jobs: Vec::new(),
                deliveries: born.deliveries,
                next_due: None,
            };
            give_back(r, unclaimed).await;
        }
    }
}

/// Sends the pool what its claim took. What a pool gone meanwhile (cut at shutdown) cannot take
/// goes back unstarted at once, instead of waiting out leases nobody holds.
async fn answer_claim(r: &Recorder, reply: oneshot::Sender<ClaimAnswer>, claimed: ClaimAnswer) {
    if let Err(Ok((claimed, _))) = reply.send(claimed) {
        give_back(r, claimed).await;
    }
}

/// Returns leases that no work item will take up (its receiver went away) to the queue,
/// unstarted: a failure is left to the rescuer.
async fn give_back(r: &Recorder, unclaimed: Claimed) {
    let now = r.clock.now();
    for leased in unclaimed.jobs {
        if let Err(e) = r.ledger.jobs().release(&leased.lease, now).await {
            tracing::warn!(job = %leased.job.key, error = %e, "could not return an unclaimed job; the rescuer will");
        }
    }
    for leased in unclaimed.deliveries {
        if let Err(e) = r.ledger.deliveries().release(&leased.lease, now).await {
            tracing::warn!(delivery = %leased.delivery.key.redacted(), error = %e, "could not return an unclaimed delivery; the rescuer will");
        }
    }
}

/// One result per item, each shared; the whole batch's error for each when it failed.
fn shared<T>(
    results: Result<Vec<crate::ledger::Result<T>>, Arc<LedgerError>>,
    n: usize,
) -> Vec<Result<T, Arc<LedgerError>>> {
    match results {
        Ok(results) => results.into_iter().map(|r| r.map_err(Arc::new)).collect(),
        Err(failed) => (0..n).map(|_| Err(failed.clone())).collect(),
    }
}

/// A finished attempt waiting for its commit: the finish, its job, and who waits for the answer.
type Waiting = (Finish, (JobKey, oneshot::Sender<Recorded>));

/// What one commit records: renders, attempts, and the jobs earlier attempts finished.
type Batch = (
    Vec<(Render, oneshot::Sender<RenderRecorded>)>,
    Vec<Waiting>,
    Vec<JobKey>,
);

/// Records a batch's renders and finishes with the settle of its carried jobs (an earlier
/// batch finished them) in one transaction, answers each item, and returns the jobs this batch
/// finished: they are settled after this commit (a settle inside it would not see another
/// worker's concurrent last finish; see `ledger.jobs().settle_many`).
async fn record(
    r: &Recorder,
    (renders, finishes, carried): Batch,
    claim: Option<(u32, oneshot::Sender<ClaimAnswer>)>,
    abandon: &CancellationToken,
) -> Vec<JobKey> {
    let (limit, claim_reply) = claim.unzip();
    let (renders, render_replies): (Vec<Render>, Vec<_>) = renders.into_iter().unzip();
    let (finishes, waiting): (Vec<Finish>, Vec<_>) = finishes.into_iter().unzip();
    let (job_keys, replies): (Vec<JobKey>, Vec<_>) = waiting.into_iter().unzip();
    let carried: Vec<&JobKey> = carried.iter().collect();
    let asked = tokio::time::Instant::now();
    let written = until_committed("outcomes", abandon, || {
        r.ledger.commit_group(GroupCommit {
            renders: &renders,
            finishes: &finishes,
            settle: &carried,
            lease_to: Some(LeaseTo {
                owner: &r.owner,
                lease_for: r.lease_for,
            }),
            claim: limit,
            now: r.clock.now(),
        })
    })
    .await;
    let (rendered, finished, claimed) = match written {
        Ok(r) => (Ok(r.renders), Ok(r.finishes), Ok((r.claimed, asked))),
        Err(e) => {
            let e = Arc::new(e);
            (Err(e.clone()), Err(e.clone()), Err(e))
        }
    };
    if let Some(reply) = claim_reply {
        answer_claim(r, reply, claimed).await;
    }
    answer_renders(r, render_replies, shared(rendered, renders.len()), asked).await;
    let results = shared(finished, finishes.len());
    let settle: BTreeSet<&JobKey> = finishes
        .iter()
        .zip(&job_keys)
        .zip(&results)
        .filter(|((f, _), r)| r.is_ok() && !matches!(f.next, DeliveryNext::Retry { .. }))
        .map(|((_, job), _)| job)
        .collect();
    let settle: Vec<JobKey> = settle.into_iter().cloned().collect();
    answer(replies, results);
    settle
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Gathers from a channel whose sender sends, at each offset of `at` from the start, a claim
    /// (urgent when its flag says so) and then stays open; how long the gathering took, in the
    /// runtime's paused time, and what it gathered.
    async fn gathering_of(at: Vec<(Duration, bool)>) -> (Duration, usize) {
        gathered(at, gathering(1)).await
    }

    /// [`gathering_of`] for a node gathering `(goal, linger)`.
    async fn gathered(at: Vec<(Duration, bool)>, goal: (usize, Duration)) -> (Duration, usize) {
        let (tx, mut rx) = mpsc::channel(MAX_BATCH);
        let started = tokio::time::Instant::now();
        tokio::spawn(async move {
            for (offset, urgent) in at {
                tokio::time::sleep_until(started + offset).await;
                let (reply, _answer) = oneshot::channel();
                let ask = Completion::Claim {
                    limit: 4,
                    urgent,
                    reply,
                };
                let _ = tx.send(ask).await;
            }
            tokio::time::sleep(Duration::from_secs(60)).await;
            drop(tx);
        });
        let mut batch = Vec::new();
        gather(&mut rx, &mut batch, goal).await;
        (started.elapsed(), batch.len())
    }

    /// An outcome every `every` from `every` on, as claims that can wait (they count as
    /// outcomes do), `n` of them.
    fn every(every: Duration, n: u32) -> Vec<(Duration, bool)> {
        (1..=n).map(|i| (every * i, false)).collect()
    }

    #[tokio::test(start_paused = true)]
    async fn an_urgent_claim_ends_the_gathering_at_once() {
        let ms = Duration::from_millis;
        let mut at = every(ms(1), 3);
        at.push((ms(4), true));
        assert_eq!(gathering_of(at).await, (ms(4), 4), "committed when it came");
    }

    #[tokio::test(start_paused = true)]
    async fn outcomes_still_coming_are_gathered_to_the_goal_or_the_linger() {
        let ms = Duration::from_millis;
        // Two outcomes a millisecond, a node at a fraction of a busy one's pace: the goal.
        let pairs: Vec<_> = every(ms(1), 100).into_iter().flat_map(|a| [a, a]).collect();
        assert_eq!(gathering_of(pairs).await, (ms(64), GOAL));
        // One every 4 ms never pauses long enough to end it: the linger does, and a claim that
        // can wait rides along (the 25th comes as the linger ends).
        assert_eq!(gathering_of(every(ms(4), 40)).await, (LINGER, 24));
    }

    #[tokio::test(start_paused = true)]
    async fn a_node_sharing_the_ledger_gathers_a_whole_batch_for_longer() {
        let ms = Duration::from_millis;
        assert_eq!(gathering(0), gathering(1), "without a registry it is alone");
        assert_eq!(gathering(2), gathering(3));
        let shared = gathering(3);
        // Two outcomes a millisecond: a lone node commits at its goal, a shared one gathers
        // twice as many.
        let pairs: Vec<_> = every(ms(1), 200).into_iter().flat_map(|a| [a, a]).collect();
        assert_eq!(gathering_of(pairs.clone()).await, (ms(64), GOAL));
        assert_eq!(gathered(pairs, shared).await, (ms(128), MAX_BATCH));
        // One every 2 ms: the lone node's linger ends it at 49, the shared one's at 99.
        let took = gathered(every(ms(2), 200), shared).await;
        assert_eq!(took, (SHARED_LINGER, 99));
        assert_eq!(gathering_of(every(ms(2), 200)).await, (LINGER, 49));
        // A pause still ends it.
        assert_eq!(gathered(every(ms(2), 3), shared).await, (ms(6) + PAUSE, 3));
    }

    #[tokio::test(start_paused = true)]
    async fn a_pause_in_the_outcomes_ends_the_gathering() {
        let ms = Duration::from_millis;
        // The end of a night: the last outcomes, then none for a pause.
        let (took, held) = gathering_of(every(ms(2), 3)).await;
        assert_eq!((took, held), (ms(6) + PAUSE, 3));
        assert_eq!(gathering_of(Vec::new()).await, (PAUSE, 0), "nothing comes");
        assert!(PAUSE * 10 <= LINGER, "a pause is a small part of a linger");
    }
}
