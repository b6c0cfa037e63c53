//! The command reference, the man pages and the shell completions are generated from the CLI's
//! own definitions, and the checked-in copies are what the code generates now. After changing a
//! command, `DAWNPOST_BLESS=1 cargo test --test it cli_reference` writes them again.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use clap::CommandFactory;
use clap_complete::Shell;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The command reference: each command's full help, as `dawnpost COMMAND --help` prints it.
fn reference_page() -> String {
    let mut cli = dawnpost::cli::Cli::command().term_width(100);
    cli.build();
    let mut page = String::from(
        "# The command line\n\n\
         Every command of `dawnpost` with its arguments, as `dawnpost COMMAND --help` prints \
         them. This page, the man pages in `docs/man/` and the shell completions in \
         `completions/` are generated from the binary's own definitions; a test fails when \
         they differ. What each command does, in context: [the command \
         line](../guide/command-line.md).\n\n",
    );
    let help = |c: &mut clap::Command| c.render_long_help().to_string();
    page.push_str(&format!(
        "## dawnpost\n\n```text\n{}\n```\n",
        help(&mut cli).trim_end()
    ));
    for sub in cli.get_subcommands_mut() {
        let name = sub.get_name().to_string();
        let text = help(sub);
        page.push_str(&format!(
            "\n## dawnpost {name}\n\n```text\n{}\n```\n",
            text.trim_end()
        ));
    }
    page
}

/// Every generated file, by its path in the repository.
fn generated() -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    out.insert(
        PathBuf::from("docs/reference/cli.md"),
        reference_page().into_bytes(),
    );
    let man = tempfile::tempdir().expect("tempdir");
    clap_mangen::generate_to(dawnpost::cli::Cli::command(), man.path()).expect("man pages");
    for entry in std::fs::read_dir(man.path()).expect("man pages") {
        let p = entry.expect("page").path();
        let name = p.file_name().expect("name").to_owned();
        out.insert(
            Path::new("docs/man").join(name),
            std::fs::read(&p).expect("page"),
        );
    }
    for (shell, file) in [
        (Shell::Bash, "dawnpost.bash"),
        (Shell::Zsh, "_dawnpost"),
        (Shell::Fish, "dawnpost.fish"),
    ] {
        let mut buf = Vec::new();
        let mut cli = dawnpost::cli::Cli::command();
        clap_complete::generate(shell, &mut cli, "dawnpost", &mut buf);
        out.insert(Path::new("completions").join(file), buf);
    }
    out
}

#[test]
fn the_command_reference_man_pages_and_completions_are_what_the_cli_generates() {
    let files = generated();
    assert!(files.len() > 10, "generated: {:?}", files.keys());
    if std::env::var_os("DAWNPOST_BLESS").is_some() {
        for (path, bytes) in &files {
            let path = root().join(path);
            std::fs::create_dir_all(path.parent().expect("folder")).expect("folder");
            std::fs::write(path, bytes).expect("write");
        }
    }
    let stale: Vec<String> = (files.iter())
        .filter(|(path, bytes)| std::fs::read(root().join(path)).ok().as_ref() != Some(*bytes))
        .map(|(path, _)| path.display().to_string())
        .collect();
    assert!(
        stale.is_empty(),
        "differ from what the CLI generates (DAWNPOST_BLESS=1 cargo test --test it cli_reference \
         writes them): {stale:?}"
    );
    // No page for a command the CLI no longer has.
    let pages: Vec<PathBuf> = std::fs::read_dir(root().join("docs/man"))
        .expect("docs/man")
        .map(|e| Path::new("docs/man").join(e.expect("page").file_name()))
        .collect();
    let orphans: Vec<&PathBuf> = pages.iter().filter(|p| !files.contains_key(*p)).collect();
    assert!(orphans.is_empty(), "man pages of no command: {orphans:?}");
}
