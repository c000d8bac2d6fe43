//! The man pages in `man/` are generated from the clap definitions in
//! `src/cli/mod.rs` with `clap_mangen`: `cdigen.1` for the command and
//! `cdigen-<subcommand>.1` for each subcommand (and `cdigen-hook-<step>.1`
//! for the steps of one that has them). This test renders them all
//! in memory and fails when a file differs; `CDIGEN_BLESS=1 cargo test
//! --test man` rewrites them (and removes the pages of subcommands that no
//! longer exist).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use cdigen::cli::{Cli, EXIT_ERROR, EXIT_FINDINGS, EXIT_LOCK_TIMEOUT, EXIT_OK};
use clap::CommandFactory;
use clap_mangen::Man;
use clap_mangen::roff::{Roff, bold, roman};

const BLESS_VAR: &str = "CDIGEN_BLESS";
const SECTION: &str = "1";

fn man_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("man")
}

/// Every page, by file name.
fn pages() -> BTreeMap<String, Vec<u8>> {
    // As `clap_mangen::generate_to` does: no page (nor entry) for `help`.
    let mut top = Cli::command().disable_help_subcommand(true);
    // Building propagates the global options (-v, -q) to the subcommands.
    top.build();
    let top_name = top.get_name().to_owned();
    // Every page's footer carries the version (an empty date keeps the
    // pages reproducible).
    let source = format!("{top_name} {}", env!("CARGO_PKG_VERSION"));
    let subs: Vec<clap::Command> = top
        .get_subcommands()
        .filter(|s| !s.is_hide_set())
        .cloned()
        .collect();
    let sub_pages: Vec<String> = subs
        .iter()
        .map(|s| format!("{top_name}-{}", s.get_name()))
        .collect();

    let mut pages = BTreeMap::new();
    // The exit status gets a section of its own below, instead of the
    // after-help text (which clap_mangen puts under "EXTRA"); the version is
    // in the footer already (and the long one names the build's revision).
    let page = top
        .clone()
        .after_help(None::<&str>)
        .after_long_help(None::<&str>)
        .version(None::<&str>)
        .long_version(None::<&str>);
    pages.insert(
        format!("{top_name}.{SECTION}"),
        render(page, &source, &sub_pages, LOCKING_EXITS),
    );
    for (sub, page_name) in subs.into_iter().zip(&sub_pages) {
        // A command with steps of its own (`cdigen hook`) gets a page per
        // step too: `cdigen-hook-update-ldcache`, each seeing its parent.
        let steps: Vec<clap::Command> = sub
            .get_subcommands()
            .filter(|s| !s.is_hide_set() && s.get_name() != "help")
            .cloned()
            .collect();
        let step_pages: Vec<String> = steps
            .iter()
            .map(|s| format!("{page_name}-{}", s.get_name()))
            .collect();
        let exits = exit_status(sub.get_name());
        // Title and NAME `cdigen-list`, SYNOPSIS `cdigen list`.
        let bin_name = format!("{top_name} {}", sub.get_name());
        for (step, step_page) in steps.into_iter().zip(&step_pages) {
            let step_bin = format!("{bin_name} {}", step.get_name());
            let page = step.display_name(step_page.clone()).bin_name(step_bin);
            pages.insert(
                format!("{step_page}.{SECTION}"),
                render(page, &source, std::slice::from_ref(page_name), exits),
            );
        }
        let mut page = sub.display_name(page_name.clone()).bin_name(bin_name);
        if exits != DEFAULT_EXITS {
            // Its own exit status section says it.
            page = page.after_help(None::<&str>).after_long_help(None::<&str>);
        }
        let see_also: Vec<String> = std::iter::once(top_name.clone())
            .chain(step_pages)
            .collect();
        pages.insert(
            format!("{page_name}.{SECTION}"),
            render(page, &source, &see_also, exits),
        );
    }
    pages
}

/// The exit codes of most commands, and what they mean.
const DEFAULT_EXITS: &[(u8, &str)] = &[
    (EXIT_OK, "Success."),
    (
        EXIT_FINDINGS,
        "Findings or failures: an invalid spec, a file not written.",
    ),
    (
        EXIT_ERROR,
        "Usage or environment errors: bad arguments, unreadable inputs.",
    ),
];

/// The exit codes of `subcommand` (and its steps), and what they mean.
fn exit_status(subcommand: &str) -> &'static [(u8, &'static str)] {
    match subcommand {
        "hook" => &[
            (
                EXIT_OK,
                "Success (something of the image's left alone, or a read-only root, is one line on stderr).",
            ),
            (
                EXIT_FINDINGS,
                "The step failed (one line on stderr): the runtime fails the container's start.",
            ),
            (EXIT_ERROR, "Usage errors: bad arguments."),
        ],
        "generate" => LOCKING_EXITS,
        _ => DEFAULT_EXITS,
    }
}

/// The exit codes of `generate`, which waits for an output directory's
/// lock (`--lock-timeout`; the long-running commands retry instead).
const LOCKING_EXITS: &[(u8, &str)] = &[
    DEFAULT_EXITS[0],
    DEFAULT_EXITS[1],
    DEFAULT_EXITS[2],
    (
        EXIT_LOCK_TIMEOUT,
        "generate: another run held an output directory's lock for longer than --lock-timeout.",
    ),
];

fn render(cmd: clap::Command, source: &str, see_also: &[String], exits: &[(u8, &str)]) -> Vec<u8> {
    let mut out = Vec::new();
    Man::new(cmd)
        .section(SECTION)
        .source(source)
        .render(&mut out)
        .unwrap();

    let mut roff = Roff::new();
    roff.control("SH", ["EXIT STATUS"]);
    for &(code, meaning) in exits {
        roff.control("TP", []);
        roff.text([bold(code.to_string())]);
        roff.text([roman(meaning)]);
    }
    roff.control("SH", ["SEE ALSO"]);
    let mut refs = Vec::new();
    for (i, page) in see_also.iter().enumerate() {
        if i > 0 {
            refs.push(roman(", "));
        }
        refs.push(bold(page.as_str()));
        refs.push(roman(format!("({SECTION})")));
    }
    roff.text(refs);
    // Without the preamble Man::render wrote already (the text above has no
    // apostrophes for it to handle).
    out.extend_from_slice(roff.to_roff().as_bytes());
    out
}

/// The generated-looking pages in `man/`: `cdigen*.1`.
fn existing_pages(dir: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut names: Vec<String> = entries
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("cdigen") && n.ends_with(&format!(".{SECTION}")))
        .collect();
    names.sort();
    names
}

fn blessing() -> bool {
    std::env::var_os(BLESS_VAR).is_some_and(|v| !v.is_empty() && v != "0")
}

#[test]
fn man_pages_are_up_to_date() {
    let dir = man_dir();
    let pages = pages();
    if blessing() {
        std::fs::create_dir_all(&dir).unwrap();
        for (name, text) in &pages {
            let path = dir.join(name);
            if std::fs::read(&path).ok().as_deref() != Some(text.as_slice()) {
                std::fs::write(&path, text).unwrap();
                eprintln!("wrote {}", path.display());
            }
        }
        for name in existing_pages(&dir) {
            if !pages.contains_key(&name) {
                std::fs::remove_file(dir.join(&name)).unwrap();
                eprintln!("removed {}", dir.join(&name).display());
            }
        }
        return;
    }
    let mut problems = Vec::new();
    for (name, text) in &pages {
        match std::fs::read(dir.join(name)) {
            Ok(file) if file == *text => {}
            Ok(_) => problems.push(format!("man/{name} is out of date")),
            Err(e) => problems.push(format!("man/{name} cannot be read: {e}")),
        }
    }
    for name in existing_pages(&dir) {
        if !pages.contains_key(&name) {
            problems.push(format!(
                "man/{name} is for a subcommand that no longer exists"
            ));
        }
    }
    assert!(
        problems.is_empty(),
        "{}\nthe man pages are generated from the clap definitions: run \
         `{BLESS_VAR}=1 cargo test --test man` to regenerate them",
        problems.join("\n")
    );
}

#[test]
fn one_page_per_subcommand_and_none_for_help() {
    let pages = pages();
    for name in [
        "cdigen.1",
        "cdigen-list.1",
        "cdigen-validate.1",
        "cdigen-hook.1",
        "cdigen-hook-update-ldcache.1",
    ] {
        assert!(pages.contains_key(name), "{name}: {:?}", pages.keys());
    }
    assert!(!pages.contains_key("cdigen-help.1"));
    assert!(!pages.contains_key("cdigen-hook-help.1"));
    let page = String::from_utf8(pages["cdigen.1"].clone()).unwrap();
    assert!(!page.contains("cdigen\\-help"), "{page}");
}

#[test]
fn subcommand_pages_are_named_for_the_subcommand() {
    let pages = pages();
    let page = String::from_utf8(pages["cdigen-validate.1"].clone()).unwrap();
    // Title, NAME and SYNOPSIS.
    assert!(page.contains(".TH cdigen-validate 1 "), "{page}");
    assert!(page.contains("\ncdigen\\-validate \\- Validate "), "{page}");
    assert!(page.contains("\\fBcdigen validate\\fR"), "{page}");
    // The global options are documented on every page.
    assert!(page.contains("\\fB\\-\\-verbose\\fR"), "{page}");
}
