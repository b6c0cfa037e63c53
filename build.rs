//! The ledger's migrations are embedded by `sqlx::migrate!` at build time; without this, a new
//! migration file alone would not rebuild the crate, and the binary would run without it.

fn main() {
    println!("cargo:rerun-if-changed=migrations");
}
