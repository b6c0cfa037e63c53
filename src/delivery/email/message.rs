//! The messages a report's emails are: their Subject and Message-ID, the whole message with
//! its parts and list headers, and the bounded copy with a link sent when the whole is too large.

use std::time::SystemTime;

use lettre::Message;
use lettre::message::header::{ContentType, HeaderName, HeaderValue};
use lettre::message::{Mailbox, MultiPart, SinglePart};

use sha2::{Digest, Sha256};

use super::DELIVERY_HEADER;
use crate::domain::keys::DeliveryKey;
use crate::report::render::Rendered;

/// The Subject of a report's email: `Warehouse 17 daily operations — 2026-11-29`.
pub fn subject(title: &str, date: &str) -> String {
    format!("{title} — {date}")
}

/// The Subject of job `job`'s emails: a reissued revision's says it is a correction, and an
/// alert's leads with its headline ("Alert: late 23 > 20 · Warehouse 17 — 2026-11-29").
pub(crate) fn subject_of(
    title: &str,
    job: &crate::domain::keys::JobKey,
    rendered: &Rendered,
) -> String {
    let plain = subject(title, &crate::domain::keys::IsoDate(job.date()).to_string());
    let plain = match job.revision() {
        1 => plain,
        n => format!("Correction (revision {n}): {plain}"),
    };
    let headline = (rendered.parts.get(crate::report::render::ALERT_PART))
        .and_then(|h| serde_json::from_str::<String>(h).ok());
    match headline {
        Some(h) => format!("{h} · {plain}"),
        None => plain,
    }
}

/// The Message-ID of a delivery: the same for every retry.
pub fn message_id(delivery_key: &(dyn std::fmt::Display + Sync), from: &Mailbox) -> String {
    let digest = message_digest(&delivery_key.to_string());
    format!("<{digest}.dawnpost@{}>", from.email.domain())
}

/// What a delivery's Message-ID holds of its key: 32 hex digits of its SHA-256.
pub fn message_digest(delivery_key: &str) -> String {
    let mut digest = hex::encode(Sha256::digest(delivery_key.as_bytes()));
    digest.truncate(32);
    digest
}

/// The key digest a Message-ID dawnpost made holds (`<DIGEST.dawnpost@domain>`), or `None`.
pub fn digest_in(message_id: &str) -> Option<&str> {
    let local = message_id
        .trim()
        .trim_start_matches('<')
        .split('@')
        .next()?;
    let digest = local.strip_suffix(".dawnpost")?;
    (digest.len() == 32 && digest.bytes().all(|b| b.is_ascii_hexdigit())).then_some(digest)
}

/// `<delivery key>.eml` with characters unsafe in file names replaced.
pub fn file_name(delivery_key: &str) -> String {
    let safe: String = delivery_key
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '@' | '+') {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("{safe}.eml")
}

/// What a report's emails carry besides their content: the headers receivers expect of an
/// automated list (RFC 2919 `List-Id`, RFC 3834 `Auto-Submitted`, RFC 2369
/// `List-Unsubscribe`) and an optional `Reply-To`.
#[derive(Debug, Clone, Copy)]
pub struct ListHeaders<'a> {
    /// `List-Id: <REPORT.dawnpost.DOMAIN>`.
    pub report: &'a str,
    pub domain: &'a str,
    pub reply_to: Option<&'a Mailbox>,
    /// A `mailto:` URL.
    pub unsubscribe: Option<&'a str>,
    /// The recipient's one-click unsubscribe URL (RFC 8058), when the report offers one.
    pub one_click: Option<&'a str>,
    /// What it attaches of the CSV part (`attach`).
    pub attach: crate::config::Attach,
}

/// The message to one recipient: the report's text and HTML as alternatives (the HTML in
/// multipart/related with its charts, when it has any; all inside multipart/mixed with the CSV
/// attachment when it has one), under [`head`]'s headers.
pub fn build_message(
    from: &Mailbox,
    to: &lettre::Address,
    subject: &str,
    delivery_key: &DeliveryKey,
    date: SystemTime,
    rendered: &Rendered,
    list: &ListHeaders<'_>,
) -> Result<Message, lettre::error::Error> {
    let builder = head(from, to, subject, delivery_key, date, list);
    let html = SinglePart::builder()
        .header(ContentType::TEXT_HTML)
        .body(rendered.html.clone());
    let text = SinglePart::builder()
        .header(ContentType::TEXT_PLAIN)
        .body(rendered.text.clone());
    let alternative = match rendered.images.is_empty() {
        true => MultiPart::alternative().singlepart(text).singlepart(html),
        // The HTML and the charts it shows by `cid:` (RFC 2387): every client shows a part so
        // referenced, where a `data:` URI or an SVG is dropped by some.
        false => MultiPart::alternative()
            .singlepart(text)
            .multipart(related(html, rendered)?),
    };
    let attachments = attachments(rendered, delivery_key.job(), list.attach)?;
    let message = match attachments.is_empty() {
        true => builder.multipart(alternative)?,
        false => {
            let mixed = (attachments.into_iter())
                .fold(MultiPart::mixed().multipart(alternative), |m, a| {
                    m.singlepart(a)
                });
            builder.multipart(mixed)?
        }
    };
    Ok(with_list_headers(message, delivery_key, list))
}

/// The files a report's email attaches: its CSV part as `REPORT-DATE.csv` and as
/// `REPORT-DATE.xlsx`, as `attach` says.
fn attachments(
    rendered: &Rendered,
    job: &crate::domain::keys::JobKey,
    attach: crate::config::Attach,
) -> Result<Vec<SinglePart>, lettre::error::Error> {
    // Constants that parse; lettre has no error of its own for them.
    let parse =
        |t: &str| ContentType::parse(t).map_err(|_| lettre::error::Error::CannotParseFilename);
    let mut out = Vec::new();
    if let (Some(csv), true) = (&rendered.csv, attach.csv) {
        let part = lettre::message::Attachment::new(job.csv_filename())
            .body(csv.clone(), parse("text/csv; charset=utf-8")?);
        out.push(part);
    }
    if let (Some(xlsx), true) = (&rendered.xlsx, attach.xlsx) {
        let part = lettre::message::Attachment::new(job.xlsx_filename())
            .body(xlsx.clone(), parse(XLSX_TYPE)?);
        out.push(part);
    }
    Ok(out)
}

/// A spreadsheet's media type.
pub const XLSX_TYPE: &str = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet";

/// The HTML part and, after it, each chart as an inline PNG with its Content-ID.
fn related(html: SinglePart, rendered: &Rendered) -> Result<MultiPart, lettre::error::Error> {
    // A constant that parses; lettre has no error of its own for it.
    let png =
        ContentType::parse("image/png").map_err(|_| lettre::error::Error::CannotParseFilename)?;
    let mut related = MultiPart::related().singlepart(html);
    for (id, bytes) in &rendered.images {
        let cid = crate::report::render::content_id(id);
        let part = lettre::message::Attachment::new_inline_with_name(cid, format!("{id}.png"))
            .body(bytes.clone(), png.clone());
        related = related.singlepart(part);
    }
    Ok(related)
}

/// The bounded copy of a report too large for email: one text part, `text` (a notice with the
/// link to the whole report, then as much of its text part as fits), under the same headers —
/// the same Message-ID — as the whole message would have had.
pub(crate) fn build_linked_message(
    from: &Mailbox,
    to: &lettre::Address,
    subject: &str,
    delivery_key: &DeliveryKey,
    date: SystemTime,
    text: String,
    list: &ListHeaders<'_>,
) -> Result<Message, lettre::error::Error> {
    let message =
        head(from, to, subject, delivery_key, date, list).singlepart(SinglePart::plain(text))?;
    Ok(with_list_headers(message, delivery_key, list))
}

/// From, To, Subject, Date, the Message-ID the delivery key makes, and Reply-To.
fn head(
    from: &Mailbox,
    to: &lettre::Address,
    subject: &str,
    delivery_key: &DeliveryKey,
    date: SystemTime,
    list: &ListHeaders<'_>,
) -> lettre::message::MessageBuilder {
    let mut builder = Message::builder()
        .from(from.clone())
        .to(Mailbox::new(None, to.clone()))
        .subject(subject)
        .date(date)
        .message_id(Some(message_id(delivery_key, from)));
    if let Some(r) = list.reply_to {
        builder = builder.reply_to(r.clone());
    }
    // A correction threads under the first revision's message to the same recipient.
    let job = delivery_key.job();
    if job.revision() > 1 {
        let first = DeliveryKey::new(
            job.with_revision(1),
            *delivery_key.kind(),
            delivery_key.destination(),
        );
        let original = message_id(&first, from);
        builder = builder.in_reply_to(original.clone()).references(original);
    }
    builder
}

/// The delivery key's header, `Auto-Submitted`, `List-Id` and `List-Unsubscribe`.
fn with_list_headers(
    mut message: Message,
    delivery_key: &DeliveryKey,
    list: &ListHeaders<'_>,
) -> Message {
    let headers = message.headers_mut();
    let mut raw = |name: &'static str, value: String| {
        headers.insert_raw(HeaderValue::new(
            HeaderName::new_from_ascii_str(name),
            value,
        ));
    };
    raw(DELIVERY_HEADER, delivery_key.to_string());
    raw("Auto-Submitted", "auto-generated".into());
    raw(
        "List-Id",
        format!("<{}.dawnpost.{}>", list.report, list.domain),
    );
    let unsubscribe: Vec<String> = (list.one_click.iter().chain(&list.unsubscribe))
        .map(|u| format!("<{u}>"))
        .collect();
    if !unsubscribe.is_empty() {
        raw("List-Unsubscribe", unsubscribe.join(", "));
    }
    if list.one_click.is_some() {
        raw("List-Unsubscribe-Post", "List-Unsubscribe=One-Click".into());
    }
    message
}

/// At least the encoded size of the message [`build_message`] makes of `rendered`: every part
/// in base64 (4/3, in lines of 76 and CRLF), and 16 KiB for headers and boundaries. Under the
/// relay's limit, the message is too, and needs no encoding to be measured.
pub(crate) fn size_bound(rendered: &Rendered) -> u64 {
    let parts = rendered.html.len()
        + rendered.text.len()
        + rendered.csv.as_ref().map_or(0, String::len)
        + rendered.images.values().map(Vec::len).sum::<usize>()
        + rendered.xlsx.as_ref().map_or(0, Vec::len);
    let base64 = (parts as u64).div_ceil(3) * 4;
    base64 + base64.div_ceil(76) * 2 + (16 << 10)
}

/// The text of a bounded copy: a notice with the link to the whole report (`size` its encoded
/// size, `limit` the relay's), then the report's text part, cut at a line's end to
/// `max_bytes`.
pub(crate) fn linked_text(
    text: &str,
    link: &str,
    (size, limit): (u64, u64),
    max_bytes: usize,
) -> String {
    let mut out = format!(
        "This report is too large to send by email ({} as a message; the limit is {}).\n\
         The whole report, with its plain text and CSV, is here:\n\n{link}\n\n",
        crate::report::render::human_size(usize::try_from(size).unwrap_or(usize::MAX)),
        crate::report::render::human_size(usize::try_from(limit).unwrap_or(usize::MAX)),
    );
    if text.len() <= max_bytes {
        out.push_str(text);
        return out;
    }
    let mut end = max_bytes;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let end = text[..end].rfind('\n').map_or(end, |i| i + 1);
    out.push_str(&text[..end]);
    out.push_str("\n[… cut here: the rest is in the whole report, at the link above.]\n");
    out
}
