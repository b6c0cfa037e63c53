//! Reports that come back by mail: RFC 3464 delivery status notifications (a
//! `multipart/report` with a `message/delivery-status` part, one block of fields per recipient)
//! and RFC 5965 abuse reports (`message/feedback-report`, a complaint), read into
//! [`Bounce`]s. The returned message, or its headers, names the delivery
//! (`X-Dawnpost-Delivery`) and its Message-ID; a complaint's `List-Id` names its report.

use mailparse::{MailHeaderMap, ParsedMail};

use crate::domain::bounce::{Bounce, BounceKind, address};

/// The largest report read: a DSN returns at most the message's headers or a bounded copy of
/// it (Postfix: 50,000 bytes by default), so anything larger is not one.
pub const MAX_REPORT_BYTES: usize = 2 * 1024 * 1024;

/// Why a message could not be read as a report.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum DsnError {
    #[error("the message is over {MAX_REPORT_BYTES} bytes: not a delivery report")]
    TooLarge,
    #[error("the message is not MIME: {0}")]
    NotMime(String),
    #[error(
        "the message is neither a delivery status notification (message/delivery-status) nor an abuse report (message/feedback-report)"
    )]
    NotAReport,
}

/// The bounces and complaints `raw` reports: one per recipient that failed (`Action: failed`,
/// or `delayed` as a soft bounce), or the complaint of an abuse report. Recipients delivered,
/// relayed or expanded are not bounces and are left out.
pub fn read(raw: &[u8]) -> Result<Vec<Bounce>, DsnError> {
    if raw.len() > MAX_REPORT_BYTES {
        return Err(DsnError::TooLarge);
    }
    let mail = mailparse::parse_mail(raw).map_err(|e| DsnError::NotMime(e.to_string()))?;
    let original = original_headers(&mail);
    if let Some(status) = part(&mail, "message/delivery-status") {
        let body = status.get_body_raw().unwrap_or_default();
        return Ok(recipients(&body)
            .into_iter()
            .map(|b| named(b, &original))
            .collect());
    }
    if let Some(feedback) = part(&mail, "message/feedback-report") {
        let body = feedback.get_body_raw().unwrap_or_default();
        return Ok(complaint(&body, &original).into_iter().collect());
    }
    Err(DsnError::NotAReport)
}

/// The first part of `mime` type, depth first.
fn part<'a>(mail: &'a ParsedMail<'a>, mime: &str) -> Option<&'a ParsedMail<'a>> {
    if mail.ctype.mimetype.eq_ignore_ascii_case(mime) {
        return Some(mail);
    }
    mail.subparts.iter().find_map(|p| part(p, mime))
}

/// What the returned message's headers say: its delivery, Message-ID and List-Id.
#[derive(Debug, Default)]
struct Original {
    delivery: Option<String>,
    message_id: Option<String>,
    list_id: Option<String>,
}

fn original_headers(mail: &ParsedMail<'_>) -> Original {
    let returned = part(mail, "message/rfc822")
        .or_else(|| part(mail, "text/rfc822-headers"))
        .or_else(|| part(mail, "message/rfc822-headers"));
    let Some(returned) = returned else {
        return Original::default();
    };
    let raw = returned.get_body_raw().unwrap_or_default();
    let Ok((headers, _)) = mailparse::parse_headers(&raw) else {
        return Original::default();
    };
    let get = |name: &str| {
        (headers.get_first_value(name))
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
    };
    Original {
        delivery: get("X-Dawnpost-Delivery"),
        message_id: get("Message-ID"),
        list_id: get("List-Id"),
    }
}

/// A bounce with what the returned message names.
fn named(mut b: Bounce, original: &Original) -> Bounce {
    b.delivery.clone_from(&original.delivery);
    b.message_id.clone_from(&original.message_id);
    b
}

/// The per-recipient blocks of a `message/delivery-status` body (the first block is the
/// message's own fields), as bounces.
fn recipients(body: &[u8]) -> Vec<Bounce> {
    let text = String::from_utf8_lossy(body).replace("\r\n", "\n");
    let blocks = text.split("\n\n").filter(|b| !b.trim().is_empty());
    blocks.skip(1).filter_map(recipient).collect()
}

fn recipient(block: &str) -> Option<Bounce> {
    let (fields, _) = mailparse::parse_headers(block.as_bytes()).ok()?;
    let get = |name: &str| fields.get_first_value(name).map(|v| v.trim().to_string());
    let action = get("Action").unwrap_or_default().to_ascii_lowercase();
    let status = get("Status").map(|s| s.split_whitespace().next().unwrap_or("").to_string());
    let kind = match (
        action.as_str(),
        status.as_deref().and_then(BounceKind::of_status),
    ) {
        ("failed", Some(kind)) => kind,
        ("failed", None) => BounceKind::Hard,
        ("delayed", _) => BounceKind::Soft,
        _ => return None,
    };
    let rcpt = get("Final-Recipient").or_else(|| get("Original-Recipient"));
    let mut b = Bounce::new("dsn", kind);
    b.address = rcpt.as_deref().and_then(address);
    b.status = status.filter(|s| BounceKind::of_status(s).is_some());
    match get("Diagnostic-Code") {
        Some(d) => Some(b.with_diagnostic(&d)),
        None => Some(b),
    }
}

/// An abuse report's complaint: its recipient (`Original-Rcpt-To`, else the returned
/// message's `To`) and the report its `List-Id` names.
fn complaint(body: &[u8], original: &Original) -> Option<Bounce> {
    let (fields, _) = mailparse::parse_headers(body).ok()?;
    let kind = (fields.get_first_value("Feedback-Type"))
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    if kind != "abuse" && kind != "fraud" {
        return None;
    }
    let mut b = named(Bounce::new("dsn", BounceKind::Complaint), original);
    b.address = (fields.get_first_value("Original-Rcpt-To")).and_then(|a| address(&a));
    b.report = original.list_id.as_deref().and_then(report_of_list_id);
    Some(b)
}

/// The report a `List-Id` dawnpost wrote names: `<REPORT.dawnpost.DOMAIN>` → `REPORT`.
fn report_of_list_id(list_id: &str) -> Option<String> {
    let inner = list_id.rsplit_once('<')?.1.split('>').next()?;
    let (report, _) = inner.split_once(".dawnpost.")?;
    (!report.is_empty()).then(|| report.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    const DSN: &str = "From: MAILER-DAEMON@relay.example\r
To: reports@dawnpost.example\r
Subject: Undelivered Mail Returned to Sender\r
MIME-Version: 1.0\r
Content-Type: multipart/report; report-type=delivery-status; boundary=\"B\"\r
\r
--B\r
Content-Type: text/plain\r
\r
I'm sorry to have to inform you that your message could not be delivered.\r
--B\r
Content-Type: message/delivery-status\r
\r
Reporting-MTA: dns; relay.example\r
Arrival-Date: Mon, 7 Dec 2026 06:00:00 +0000\r
\r
Final-Recipient: rfc822; Bob@Carrier-Y.example\r
Original-Recipient: rfc822;bob@carrier-y.example\r
Action: failed\r
Status: 5.1.1\r
Diagnostic-Code: smtp; 550 5.1.1 <bob@carrier-y.example>: Recipient address rejected\r
\r
Final-Recipient: rfc822; ann@carrier-y.example\r
Action: delayed\r
Status: 4.4.1\r
\r
Final-Recipient: rfc822; ok@carrier-y.example\r
Action: delivered\r
Status: 2.0.0\r
--B\r
Content-Type: text/rfc822-headers\r
\r
From: reports@dawnpost.example\r
To: bob@carrier-y.example\r
Message-ID: <0123456789abcdef0123456789abcdef.dawnpost@dawnpost.example>\r
X-Dawnpost-Delivery: warehouse-17:2026-11-29/email:bob@carrier-y.example\r
Subject: Stock\r
--B--\r
";

    #[test]
    fn a_dsn_reads_as_one_bounce_per_failed_recipient() {
        let bounces = read(DSN.as_bytes()).expect("read");
        assert_eq!(bounces.len(), 2, "{bounces:?}");
        let hard = &bounces[0];
        assert_eq!(hard.kind, BounceKind::Hard);
        assert_eq!(hard.address.as_deref(), Some("bob@carrier-y.example"));
        assert_eq!(hard.status.as_deref(), Some("5.1.1"));
        assert_eq!(
            hard.delivery.as_deref(),
            Some("warehouse-17:2026-11-29/email:bob@carrier-y.example")
        );
        assert!(
            (hard.diagnostic.as_deref())
                .is_some_and(|d| d.contains("b***@carrier-y.example") && !d.contains("bob@")),
            "{hard:?}"
        );
        assert_eq!(bounces[1].kind, BounceKind::Soft);
        assert_eq!(bounces[1].status.as_deref(), Some("4.4.1"));
    }

    #[test]
    fn an_abuse_report_is_a_complaint_naming_its_report() {
        let arf = "From: fbl@isp.example\r
MIME-Version: 1.0\r
Content-Type: multipart/report; report-type=feedback-report; boundary=\"F\"\r
\r
--F\r
Content-Type: text/plain\r
\r
This is an email abuse report.\r
--F\r
Content-Type: message/feedback-report\r
\r
Feedback-Type: abuse\r
User-Agent: isp-fbl/1.0\r
Version: 1\r
Original-Rcpt-To: <carol@isp.example>\r
--F\r
Content-Type: message/rfc822\r
\r
From: reports@dawnpost.example\r
List-Id: <warehouse-17.dawnpost.dawnpost.example>\r
Message-ID: <0123456789abcdef0123456789abcdef.dawnpost@dawnpost.example>\r
\r
body\r
--F--\r
";
        let bounces = read(arf.as_bytes()).expect("read");
        assert_eq!(bounces.len(), 1);
        assert_eq!(bounces[0].kind, BounceKind::Complaint);
        assert_eq!(bounces[0].address.as_deref(), Some("carol@isp.example"));
        assert_eq!(bounces[0].report.as_deref(), Some("warehouse-17"));
    }

    #[test]
    fn what_is_not_a_report_is_refused_saying_so() {
        let plain = "From: a@b.example\r\nSubject: hi\r\n\r\nhello\r\n";
        assert_eq!(read(plain.as_bytes()), Err(DsnError::NotAReport));
        let big = vec![b'a'; MAX_REPORT_BYTES + 1];
        assert_eq!(read(&big), Err(DsnError::TooLarge));
        assert!(
            read(&[0xff, 0xfe, 0x00]).is_err(),
            "bytes that are no message"
        );
    }
}
