//! Bounces and complaints taken in, whatever brought them (a provider's webhook, a DSN posted
//! or piped from a mailbox): each matched to the delivery it is about — by the delivery key
//! its returned message names, else by its Message-ID among the sent deliveries to its
//! address — recorded, counted, and its address suppressed as `[recipients]` says.

use chrono::{DateTime, Utc};

use crate::config::RecipientSettings;
use crate::delivery::email::message::{digest_in, message_digest};
use crate::domain::bounce::Bounce;
use crate::domain::keys::DeliveryKey;
use crate::ledger::{Ledger, LedgerError, Recorded, SoftPolicy};
use crate::runtime::metrics::Metrics;

/// How many sent deliveries to one address a Message-ID is looked for among, newest first.
const CANDIDATES: u32 = 1000;

/// Records each of `bounces` at `at`, matched and counted; what each did, in order.
pub async fn take(
    ledger: &Ledger,
    bounces: &[Bounce],
    policy: &RecipientSettings,
    metrics: Option<&Metrics>,
    at: DateTime<Utc>,
) -> Result<Vec<Recorded>, LedgerError> {
    let soft = SoftPolicy {
        limit: policy.soft_bounces,
        window: policy.soft_bounce_window.as_chrono(),
    };
    let mut out = Vec::with_capacity(bounces.len());
    for b in bounces {
        let delivery = matched(ledger, b).await?;
        let mut b = b.clone();
        if b.address.is_none() {
            b.address = delivery.as_ref().and_then(crate::delivery::recipient);
        }
        let recorded = ledger
            .recipients()
            .record(&b, delivery.as_ref(), soft, at)
            .await?;
        if let Some(m) = metrics {
            m.bounce(b.provider, b.kind.as_str(), recorded.delivery.is_some());
        }
        match (&recorded.delivery, &recorded.suppressed) {
            (None, _) => tracing::warn!(
                provider = b.provider,
                kind = b.kind.as_str(),
                "a bounce matched no delivery: kept, not used to suppress"
            ),
            (Some(d), Some(s)) => {
                tracing::warn!(delivery = %d.redacted(), provider = b.provider, kind = b.kind.as_str(), cause = s.cause.as_str(), "bounce recorded; its recipient is suppressed")
            }
            (Some(d), None) => {
                tracing::info!(delivery = %d.redacted(), provider = b.provider, kind = b.kind.as_str(), "bounce recorded")
            }
        }
        out.push(recorded);
    }
    Ok(out)
}

/// The delivery `b` is about: the one its returned message names, if it exists, else the sent
/// delivery to its address whose Message-ID it names.
async fn matched(ledger: &Ledger, b: &Bounce) -> Result<Option<DeliveryKey>, LedgerError> {
    if let Some(key) = (b.delivery.as_deref()).and_then(|k| k.parse::<DeliveryKey>().ok())
        && ledger.deliveries().get(&key).await?.is_some()
    {
        return Ok(Some(key));
    }
    let (Some(id), Some(address)) = (b.message_id.as_deref(), b.address.as_deref()) else {
        return Ok(None);
    };
    let Some(digest) = digest_in(id) else {
        return Ok(None);
    };
    let sent = ledger.recipients().sent_to(address, CANDIDATES).await?;
    Ok(sent
        .into_iter()
        .find(|k| message_digest(&k.to_string()) == digest))
}
