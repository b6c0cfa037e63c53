use std::process::ExitCode;
use std::time::Duration;

fn main() -> ExitCode {
    dawnpost::cli::limit_malloc_arenas();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            dawnpost::runtime::logging::eprint_line(&format!(
                "error: cannot start the runtime: {e}"
            ));
            dawnpost::runtime::logging::flush(Duration::from_secs(1));
            return ExitCode::FAILURE;
        }
    };
    let code = runtime.block_on(dawnpost::cli::main());
    // A blocking task stuck on I/O must not hold the exit, and neither may a log sink that
    // nobody reads: both waits are bounded.
    runtime.shutdown_timeout(Duration::from_secs(2));
    dawnpost::runtime::logging::flush(Duration::from_secs(1));
    code
}
