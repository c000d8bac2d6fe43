//! The shell completion scripts in `contrib/completions/` are generated from
//! the clap definitions in `src/cli/mod.rs` with `clap_complete`, and
//! `cdigen completions SHELL` prints the same scripts. This test fails when
//! a committed script differs; `CDIGEN_BLESS=1 cargo test --test
//! completions` rewrites them.
//!
//! The scripts are also run in their shells: bash always, zsh and fish when
//! installed (`CDIGEN_REQUIRE_SHELLS=1`, as CI sets it, makes a missing
//! shell a failure instead of a skip).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use cdigen::cli::{Cli, Shell, completion_script};
use clap::CommandFactory;

const BLESS_VAR: &str = "CDIGEN_BLESS";
const REQUIRE_VAR: &str = "CDIGEN_REQUIRE_SHELLS";

/// Each shell, its committed file and the shell's binary.
const SHELLS: [(Shell, &str, &str); 3] = [
    (Shell::Bash, "cdigen.bash", "bash"),
    (Shell::Zsh, "_cdigen", "zsh"),
    (Shell::Fish, "cdigen.fish", "fish"),
];

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("contrib/completions")
}

fn flag(var: &str) -> bool {
    std::env::var_os(var).is_some_and(|v| !v.is_empty() && v != "0")
}

#[test]
fn committed_scripts_are_up_to_date() {
    let dir = dir();
    if flag(BLESS_VAR) {
        std::fs::create_dir_all(&dir).unwrap();
        for (shell, file, _) in SHELLS {
            let path = dir.join(file);
            let text = completion_script(shell);
            if std::fs::read(&path).ok().as_deref() != Some(text.as_slice()) {
                std::fs::write(&path, text).unwrap();
                eprintln!("wrote {}", path.display());
            }
        }
        return;
    }
    let mut problems = Vec::new();
    for (shell, file, _) in SHELLS {
        match std::fs::read(dir.join(file)) {
            Ok(text) if text == completion_script(shell) => {}
            Ok(_) => problems.push(format!("contrib/completions/{file} is out of date")),
            Err(e) => problems.push(format!("contrib/completions/{file} cannot be read: {e}")),
        }
    }
    assert!(
        problems.is_empty(),
        "{}\nthe completion scripts are generated from the clap definitions: run \
         `{BLESS_VAR}=1 cargo test --test completions` to regenerate them",
        problems.join("\n")
    );
}

#[test]
fn the_binary_prints_the_committed_scripts() {
    for (shell, _, name) in SHELLS {
        let out = assert_cmd::Command::cargo_bin("cdigen")
            .unwrap()
            .args(["completions", name])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{name}");
        assert!(out.stderr.is_empty(), "{name}: {:?}", out.stderr);
        assert_eq!(out.stdout, completion_script(shell), "{name}");
    }
}

#[test]
fn an_unknown_shell_is_a_usage_error() {
    let out = assert_cmd::Command::cargo_bin("cdigen")
        .unwrap()
        .args(["completions", "tcsh"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains("invalid value 'tcsh' for '<SHELL>'")
            && err.contains("[possible values: bash, zsh, fish]"),
        "{err}"
    );
}

/// Every subcommand and every long option of each is in every script (so a
/// script cannot silently lose part of the command line).
#[test]
fn scripts_cover_every_subcommand_and_option() {
    let mut top = Cli::command();
    top.build();
    let subs: Vec<clap::Command> = top.get_subcommands().cloned().collect();
    assert!(
        subs.len() >= 6,
        "{:?}",
        subs.iter().map(|s| s.get_name()).collect::<Vec<_>>()
    );
    for (shell, file, _) in SHELLS {
        let text = String::from_utf8(completion_script(shell)).unwrap();
        for sub in &subs {
            assert!(
                text.contains(sub.get_name()),
                "{file}: no {}",
                sub.get_name()
            );
            for arg in sub.get_arguments() {
                if let Some(long) = arg.get_long() {
                    let option = match shell {
                        Shell::Fish => format!("-l {long}"),
                        _ => format!("--{long}"),
                    };
                    assert!(
                        text.contains(&option),
                        "{file}: no --{long} of {}",
                        sub.get_name()
                    );
                }
            }
        }
    }
}

/// Runs `program args…`; None when the program is not installed (a
/// failure instead when `CDIGEN_REQUIRE_SHELLS` is set).
fn shell(program: &str, args: &[&str]) -> Option<String> {
    match Command::new(program).args(args).output() {
        Ok(out) => {
            let stdout = String::from_utf8(out.stdout).unwrap();
            let stderr = String::from_utf8(out.stderr).unwrap();
            assert!(
                out.status.success() && stderr.is_empty(),
                "{program} {args:?}: {:?}\nstdout:\n{stdout}\nstderr:\n{stderr}",
                out.status
            );
            Some(stdout)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && !flag(REQUIRE_VAR) => {
            // Straight to stderr: the test harness captures `eprintln!`, and
            // this line must show in a passing run.
            let _ = writeln!(
                std::io::stderr(),
                "skipped: {program} is not installed ({REQUIRE_VAR}=1 makes this a failure)"
            );
            None
        }
        Err(e) => panic!("cannot run {program}: {e}"),
    }
}

fn script_path(file: &str) -> String {
    dir().join(file).to_str().unwrap().to_owned()
}

/// Completes the words of `line` (the last one being completed) with the
/// bash script, as bash-completion calls it; returns the candidates.
fn bash_complete(words: &[&str]) -> Vec<String> {
    let script = r#"
source "$1"; shift
COMP_WORDS=("$@")
COMP_CWORD=$(( $# - 1 ))
COMP_LINE="$*"
COMP_POINT=${#COMP_LINE}
_cdigen cdigen "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"
printf '%s\n' "${COMPREPLY[@]}"
"#;
    let path = script_path("cdigen.bash");
    let mut args = vec!["--norc", "--noprofile", "-c", script, "bash", path.as_str()];
    args.extend_from_slice(words);
    let out = shell("bash", &args).expect("bash is always there");
    let mut got: Vec<String> = out
        .lines()
        .filter(|l| !l.is_empty())
        .map(String::from)
        .collect();
    got.sort();
    got
}

#[test]
fn bash_completes_subcommands_options_and_values() {
    assert_eq!(bash_complete(&["cdigen", "gen"]), ["generate"]);
    assert_eq!(bash_complete(&["cdigen", "comp"]), ["completions"]);
    assert_eq!(bash_complete(&["cdigen", "completions", "z"]), ["zsh"]);
    let all = bash_complete(&["cdigen", "completions", ""]);
    for name in ["bash", "fish", "zsh", "--help"] {
        assert!(all.iter().any(|c| c == name), "{all:?}");
    }
    assert_eq!(
        bash_complete(&["cdigen", "generate", "--output-d"]),
        ["--output-dir"]
    );
    assert_eq!(
        bash_complete(&["cdigen", "generate", "--format", ""]),
        ["json", "yaml"]
    );
}

#[test]
fn zsh_reads_its_script() {
    // zsh completion functions only run inside the completion system (zle);
    // this checks the script parses, and that it defines the function.
    let path = script_path("_cdigen");
    if shell("zsh", &["-n", &path]).is_none() {
        return;
    }
    let out = shell(
        "zsh",
        &[
            "-f",
            "-c",
            "autoload -U compinit; compinit -u -D; source \"$1\"; whence -w _cdigen",
            "zsh",
            &path,
        ],
    )
    .unwrap();
    assert_eq!(out.trim(), "_cdigen: function");
}

#[test]
fn fish_completes_subcommands_and_values() {
    let path = script_path("cdigen.fish");
    let complete = |line: &str| -> Option<Vec<String>> {
        let out = shell(
            "fish",
            &[
                "--no-config",
                "-c",
                "source $argv[1]; complete -C $argv[2]",
                &path,
                line,
            ],
        )?;
        // Each candidate is `word<TAB>description`.
        let mut got: Vec<String> = out
            .lines()
            .map(|l| l.split('\t').next().unwrap_or_default().to_owned())
            .collect();
        got.sort();
        Some(got)
    };
    let Some(got) = complete("cdigen gen") else {
        return;
    };
    assert_eq!(got, ["generate"]);
    // (clap_complete's fish script does not complete positional values, such
    // as the shell of `cdigen completions`: options' values it does.)
    assert_eq!(
        complete("cdigen generate --format ").unwrap(),
        ["json", "yaml"]
    );
}
