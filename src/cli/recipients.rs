//! `bounce` (a delivery report piped from a mailbox), `suppressions`, `suppress` and
//! `unsuppress` (an operator's, audited in the suppression's row).

use std::io::Read as _;
use std::process::ExitCode;

use super::{BounceArgs, EXIT_ERROR, LedgerSlot, SendTestArgs, SuppressArgs, SuppressionsArgs};
use crate::config::Config;
use crate::delivery::email::dsn;
use crate::domain::clock::SharedClock;
use crate::ledger::{Audit, Cause, NewSuppression, Via, scope};
use crate::views::history::Redactions;
use crate::views::recipients::{BounceTakenV1, SuppressionsV1, hiding, text};

/// `dawnpost bounce < message.eml`: the DSN or abuse report on stdin, recorded.
pub(super) async fn bounce(
    config: &Config,
    ledger: &mut LedgerSlot<'_>,
    args: &BounceArgs,
    clock: SharedClock,
) -> anyhow::Result<ExitCode> {
    let mut raw = Vec::new();
    let limit = u64::try_from(dsn::MAX_REPORT_BYTES).unwrap_or(u64::MAX) + 1;
    std::io::stdin().take(limit).read_to_end(&mut raw)?;
    let bounces = match dsn::read(&raw) {
        Ok(b) => b,
        Err(e) => {
            errln!("stdin: {e}");
            return Ok(ExitCode::from(EXIT_ERROR));
        }
    };
    if bounces.is_empty() {
        out!("the report names no recipient that failed: nothing recorded");
        return Ok(ExitCode::SUCCESS);
    }
    let l = ledger.get().await?;
    let policy = &config.settings.recipients;
    let taken = crate::services::bounces::take(&l, &bounces, policy, None, clock.now()).await?;
    let replies: Vec<BounceTakenV1> = (bounces.iter().zip(&taken))
        .map(|(b, r)| BounceTakenV1::of(b, r))
        .collect();
    let hide = match args.reveal {
        true => Redactions::default(),
        false => hiding(bounces.iter().filter_map(|b| b.address.as_deref())),
    };
    for r in &replies {
        if args.json {
            let v = crate::views::api::redacted_json(r, &hide)?;
            out!("{}", serde_json::to_string(&v)?);
        } else {
            out!("{}", hide.text(&r.line()));
        }
    }
    Ok(ExitCode::SUCCESS)
}

pub(super) async fn suppressions(
    ledger: &mut LedgerSlot<'_>,
    args: &SuppressionsArgs,
) -> anyhow::Result<ExitCode> {
    let l = ledger.get().await?;
    let list = l.recipients().suppressions(args.all, args.limit).await?;
    let hide = match args.reveal {
        true => Redactions::default(),
        false => hiding(list.iter().map(|s| s.address.as_str())),
    };
    if args.json {
        let v = crate::views::api::redacted_json(&SuppressionsV1::of(&list), &hide)?;
        out!("{}", serde_json::to_string(&v)?);
    } else {
        out_raw!("{}", hide.text(&text(&list)));
    }
    Ok(ExitCode::SUCCESS)
}

/// The address an operator typed, as suppressions compare it.
fn address_of(raw: &str) -> anyhow::Result<String> {
    crate::domain::bounce::address(raw)
        .ok_or_else(|| anyhow::anyhow!("ADDRESS: {raw:?} is not an email address"))
}

fn audit<'a>(args: &'a SuppressArgs, what: &str) -> anyhow::Result<Audit<'a>> {
    Audit::new(&args.by, &args.reason, Via::Cli)
        .map_err(|_| anyhow::anyhow!("--by and --reason must not be empty: the {what} is audited"))
}

pub(super) async fn suppress(
    ledger: &mut LedgerSlot<'_>,
    args: &SuppressArgs,
    clock: SharedClock,
) -> anyhow::Result<ExitCode> {
    let address = address_of(&args.address)?;
    let audit = audit(args, "suppression")?;
    let l = ledger.get().await?;
    let s = NewSuppression {
        address: &address,
        report: args.report.as_deref(),
        cause: Cause::Operator,
        why: &args.reason,
        at: clock.now(),
    };
    let shown = crate::domain::redact::redact_address(&address);
    let whom = scope(args.report.as_deref());
    if l.recipients().suppress(s, Some(&audit)).await? {
        out!("suppressed {shown} {whom} by {}: {}", args.by, args.reason);
    } else {
        out!("{shown} was already suppressed {whom}: nothing changed");
    }
    Ok(ExitCode::SUCCESS)
}

pub(super) async fn unsuppress(
    ledger: &mut LedgerSlot<'_>,
    args: &SuppressArgs,
    clock: SharedClock,
) -> anyhow::Result<ExitCode> {
    let address = address_of(&args.address)?;
    let audit = audit(args, "lift")?;
    let l = ledger.get().await?;
    let report = args.report.as_deref();
    let shown = crate::domain::redact::redact_address(&address);
    let whom = scope(report);
    if l.recipients()
        .unsuppress(&address, report, &audit, clock.now())
        .await?
    {
        out!(
            "{shown} is no longer suppressed {whom} (lifted by {}: {})",
            args.by,
            args.reason
        );
        Ok(ExitCode::SUCCESS)
    } else {
        errln!(
            "{shown} is not suppressed {whom}: nothing changed (`dawnpost suppressions` lists them)"
        );
        Ok(ExitCode::from(EXIT_ERROR))
    }
}

/// `send-test REPORT --to ADDRESS [--date D] --by NAME`: the report for a date, emailed to one
/// address, audited.
pub(super) async fn send_test(
    config: &Config,
    ledger: &mut LedgerSlot<'_>,
    args: &SendTestArgs,
    clock: SharedClock,
) -> anyhow::Result<ExitCode> {
    use crate::views::test_send::{TestSendRequest, TestSender};
    let audit = Audit::new(&args.by, "a test send", Via::Cli)
        .map_err(|_| anyhow::anyhow!("--by must not be empty: a test send is audited"))?;
    let date = match &args.date {
        None => None,
        Some(d) => Some(
            crate::domain::keys::parse_date(d)
                .ok_or_else(|| anyhow::anyhow!("--date {d:?} is not a date (YYYY-MM-DD)"))?,
        ),
    };
    let req = TestSendRequest {
        report: &args.report,
        to: &args.to,
        date,
    };
    let Some(report) = config.report(&args.report) else {
        errln!("not sent: no report {:?} in the configuration", args.report);
        return Ok(ExitCode::from(EXIT_ERROR));
    };
    let templates = crate::report::render::Templates::load(
        &config.root,
        &report.template,
        &config.template_parts,
    )?;
    let sender = TestSender::new(config)?;
    let l = ledger.get().await?;
    let made = (report, Some(&templates));
    match sender.send(made, &l, &req, &audit, clock.now()).await {
        Ok(sent) => {
            let (report, by) = (&args.report, &args.by);
            out!(
                "sent a test of {report} for {} to {} by {by}: {}",
                crate::domain::keys::IsoDate(sent.date),
                sent.to,
                sent.answer
            );
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            errln!("not sent: {e}");
            Ok(ExitCode::from(EXIT_ERROR))
        }
    }
}
