//! What comes back after a send: a bounce (the recipient's server refused the message, for good
//! or for now) or a complaint (the recipient marked it as spam), as any source reports it — a
//! delivery status notification, a provider's webhook — and what an address is when compared.

/// How a bounce counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BounceKind {
    /// A permanent failure (status 5.x.x): the address is suppressed at once.
    Hard,
    /// A temporary one (4.x.x): counted; enough of them in a window suppress.
    Soft,
    /// The recipient reported the message as spam.
    Complaint,
}

impl BounceKind {
    pub const ALL: [BounceKind; 3] = [BounceKind::Hard, BounceKind::Soft, BounceKind::Complaint];

    pub const fn as_str(self) -> &'static str {
        match self {
            BounceKind::Hard => "hard",
            BounceKind::Soft => "soft",
            BounceKind::Complaint => "complaint",
        }
    }

    pub fn parse(s: &str) -> Option<BounceKind> {
        BounceKind::ALL.into_iter().find(|k| k.as_str() == s)
    }

    /// The kind an enhanced status code (RFC 3463, `5.1.1`) says: 5 hard, 4 soft; `None` for
    /// a success (2) or a code that is not one.
    pub fn of_status(status: &str) -> Option<BounceKind> {
        let mut parts = status.trim().split('.');
        let class = parts.next()?;
        let valid = parts.clone().count() == 2
            && parts
                .all(|p| !p.is_empty() && p.len() <= 3 && p.bytes().all(|b| b.is_ascii_digit()));
        match (class, valid) {
            ("5", true) => Some(BounceKind::Hard),
            ("4", true) => Some(BounceKind::Soft),
            _ => None,
        }
    }
}

/// One bounce or complaint for one recipient, as its source reported it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bounce {
    /// Where it came from: `dsn`, `ses`, `postmark`, `sendgrid`, `mailgun`.
    pub provider: &'static str,
    pub kind: BounceKind,
    /// The recipient, as [`address`] compares it; `None` when the report did not name one.
    pub address: Option<String>,
    /// The enhanced status code (`5.1.1`), when given.
    pub status: Option<String>,
    /// What the receiving server said, with addresses masked and bounded.
    pub diagnostic: Option<String>,
    /// The delivery it names (`X-Dawnpost-Delivery` of the message it returns), unchecked.
    pub delivery: Option<String>,
    /// The Message-ID of the message it is about, unchecked.
    pub message_id: Option<String>,
    /// The report a complaint names (its `List-Id`), when it names one.
    pub report: Option<String>,
}

/// The most of a diagnostic kept.
const DIAGNOSTIC_LIMIT: usize = 500;

impl Bounce {
    /// A bounce of `kind` from `provider` with nothing else known yet.
    pub fn new(provider: &'static str, kind: BounceKind) -> Bounce {
        Bounce {
            provider,
            kind,
            address: None,
            status: None,
            diagnostic: None,
            delivery: None,
            message_id: None,
            report: None,
        }
    }

    /// Sets the diagnostic: every address in it masked, at most 500 bytes.
    pub fn with_diagnostic(mut self, text: &str) -> Bounce {
        let masked = masked_addresses(text.trim());
        let mut end = masked.len().min(DIAGNOSTIC_LIMIT);
        while !masked.is_char_boundary(end) {
            end -= 1;
        }
        self.diagnostic = Some(masked[..end].to_string()).filter(|d| !d.is_empty());
        self
    }
}

/// An address as dawnpost compares it: trimmed, without angle brackets or an RFC 3464
/// `rfc822;` type, lower case. `None` when it is not `local@domain`.
pub fn address(raw: &str) -> Option<String> {
    let s = raw.trim();
    let s = match s.split_once(';') {
        Some((kind, rest)) if kind.trim().eq_ignore_ascii_case("rfc822") => rest.trim(),
        _ => s,
    };
    let s = s.trim_start_matches('<').trim_end_matches('>').trim();
    let (local, domain) = s.rsplit_once('@')?;
    let ok = !local.is_empty()
        && domain.contains('.')
        && !s
            .chars()
            .any(|c| c.is_whitespace() || c.is_control() || "<>,;".contains(c));
    ok.then(|| s.to_ascii_lowercase())
}

/// `text` with every word that holds an `@` masked as [`redact_address`](super::redact) does.
pub fn masked_addresses(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for (i, word) in text.split(' ').enumerate() {
        if i > 0 {
            out.push(' ');
        }
        match word.find('@') {
            Some(at) => {
                let start = word[..at]
                    .rfind(|c: char| "<(\"':;,[".contains(c))
                    .map_or(0, |i| i + 1);
                let end = word[at..]
                    .find(|c: char| ">)\"',;]".contains(c))
                    .map_or(word.len(), |i| at + i);
                out.push_str(&word[..start]);
                out.push_str(&super::redact::redact_address(&word[start..end]));
                out.push_str(&word[end..]);
            }
            None => out.push_str(word),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_status_says_the_kind() {
        assert_eq!(BounceKind::of_status("5.1.1"), Some(BounceKind::Hard));
        assert_eq!(BounceKind::of_status(" 4.2.2 "), Some(BounceKind::Soft));
        assert_eq!(BounceKind::of_status("2.0.0"), None);
        assert_eq!(BounceKind::of_status("5.1"), None);
        assert_eq!(BounceKind::of_status("5.x.1"), None);
        assert_eq!(BounceKind::of_status(""), None);
    }

    #[test]
    fn an_address_is_compared_in_one_form() {
        assert_eq!(
            address("rfc822; Ops@Carrier-X.example").as_deref(),
            Some("ops@carrier-x.example")
        );
        assert_eq!(address("<a@b.example>").as_deref(), Some("a@b.example"));
        assert_eq!(address("not an address"), None);
        assert_eq!(address("a b@c.example"), None);
        assert_eq!(address("@c.example"), None);
        assert_eq!(address("a@localhost"), None);
    }

    #[test]
    fn a_diagnostic_shows_no_address_and_is_bounded() {
        let b = Bounce::new("dsn", BounceKind::Hard)
            .with_diagnostic("smtp; 550 5.1.1 <bob@carrier-y.example>: Recipient address rejected");
        assert_eq!(
            b.diagnostic.as_deref(),
            Some("smtp; 550 5.1.1 <b***@carrier-y.example>: Recipient address rejected")
        );
        let long = "é".repeat(400);
        let b = Bounce::new("dsn", BounceKind::Hard).with_diagnostic(&long);
        assert!(b.diagnostic.is_some_and(|d| d.len() <= DIAGNOSTIC_LIMIT));
    }
}
