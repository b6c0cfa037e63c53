//! The Standard Webhooks verifier on hostile headers: id, timestamp, body and signature
//! entries from the input; refuses or accepts, never panics, and accepts only a real signature.
#![no_main]
use libfuzzer_sys::fuzz_target;

const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

fuzz_target!(|data: &[u8]| {
    let Ok(secret) = dawnpost::delivery::signing::Secret::parse(SECRET) else {
        return;
    };
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let mut parts = text.splitn(4, '\n');
    let (id, ts, header, body) = (
        parts.next().unwrap_or(""),
        parts.next().unwrap_or(""),
        parts.next().unwrap_or(""),
        parts.next().unwrap_or(""),
    );
    let ts: i64 = ts.trim().parse().unwrap_or(0);
    let verdict = secret.verify(id, ts, body.as_bytes(), header);
    // Anything accepted carries the signature the secret makes.
    if verdict.is_ok() {
        assert!(header.contains(&secret.sign(id, ts, body.as_bytes())));
    }
});
