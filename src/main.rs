use std::process::ExitCode;

#[tokio::main]
async fn main() -> ExitCode {
    dawnpost::cli::main().await
}
