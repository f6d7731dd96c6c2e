//! The docs test: every runnable shell block of the user pages, run in page order against a
//! control plane and ferro-ipam started as `make demo` starts them, with the demo's examples
//! applied. The rules of the blocks are in [`blocks`]; `docs/development.md` tells writers.
//!
//! Each block runs with `bash -euo pipefail`, in the repository's root, with `KUBECONFIG`
//! pointing at the plane and `PATH` starting with the built `ferro-ipam` and the plane's
//! `kubectl`. A `sh` block is one script; each command of a `console` block is one script whose
//! stdout and stderr together must match the output the page shows. The pages share the plane:
//! each starts from the state the pages before it left, in the book's order ([`user_pages`]). A failure
//! ends its page (later blocks of the page may depend on it); the other pages still run, and
//! the test fails naming the page, line, command, and the exit status or the difference. Files
//! the pages write into the repository's root are listed in [`WRITTEN`] and removed at the end.
//!
//! `FERRO_IPAM_DOCS_PAGES=who-has-and-top.md,metrics.md` runs only those pages (after the
//! demo's examples), for writing a page.

mod blocks;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context as _, Result};
use blocks::{Block, Kind};
use ferro_ipam_e2e::plane::repo_root;
use ferro_ipam_e2e::{ControlPlane, Provider};

/// The heading of SUMMARY.md's part that holds the contributor guide; the pages before it are
/// the user pages.
const CONTRIBUTOR_PART: &str = "# Contributor guide";

/// The user pages: the book's pages before its contributor guide, in the book's order, which is
/// the order they run in.
fn user_pages() -> Vec<String> {
    let summary = page_text("SUMMARY.md");
    let user_part = summary.split(CONTRIBUTOR_PART).next().unwrap_or_default();
    let pages: Vec<String> = user_part
        .match_indices("](")
        .filter_map(|(at, _)| user_part[at + 2..].split(')').next())
        .filter(|target| target.ends_with(".md"))
        .map(str::to_owned)
        .collect();
    assert!(pages.len() > 10 && summary.contains(CONTRIBUTOR_PART), "docs/SUMMARY.md lists no user part: {pages:?}");
    pages
}

/// Files the pages write into the repository's root (migration.md's backup and preflight
/// report), removed after the run.
const WRITTEN: [&str; 3] = ["preflight.json", "ipam-backup.yaml", "addresses-before.txt"];

/// The longest a block's command may run.
const TIMEOUT_SECONDS: &str = "120";

fn page_text(page: &str) -> String {
    let path = repo_root().join("docs").join(page);
    std::fs::read_to_string(&path).unwrap_or_else(|error| panic!("reading {}: {error}", path.display()))
}

#[test]
fn every_shell_block_of_the_user_pages_is_labelled() {
    let errors: Vec<String> = user_pages()
        .iter()
        .filter_map(|page| blocks::shell_blocks(&page_text(page)).err().map(|error| format!("docs/{page}: {error}")))
        .collect();
    assert!(errors.is_empty(), "{}", errors.join("\n"));
}

/// Where and how the blocks run.
struct Shell {
    kubeconfig: PathBuf,
    path: String,
}

impl Shell {
    fn new(plane: &ControlPlane) -> Shell {
        let ferro_ipam = ferro_ipam_e2e::provider::binary();
        let dirs = [ferro_ipam.parent().expect("the binary is in a directory"), &plane.tools.dir.join("bin")];
        let mut path: Vec<String> = dirs.iter().map(|d| d.to_string_lossy().into_owned()).collect();
        path.extend(std::env::var("PATH").ok());
        Shell { kubeconfig: plane.kubeconfig.clone(), path: path.join(":") }
    }

    /// Runs `script` with bash; its exit status and its stdout and stderr together.
    fn run(&self, script: &str) -> Result<(Option<i32>, String)> {
        let output = Command::new("timeout")
            .args(["--kill-after=5", TIMEOUT_SECONDS, "bash", "-euo", "pipefail", "-c"])
            .arg(format!("exec 2>&1\n{script}"))
            .current_dir(repo_root())
            .env("KUBECONFIG", &self.kubeconfig)
            .env("PATH", &self.path)
            .stdin(Stdio::null())
            .output()
            .context("running bash")?;
        Ok((output.status.code(), String::from_utf8_lossy(&output.stdout).into_owned()))
    }
}

fn status(code: Option<i32>) -> String {
    match code {
        Some(124) => format!("timed out after {TIMEOUT_SECONDS}s"),
        Some(code) => format!("exit status {code}"),
        None => "killed by a signal".to_owned(),
    }
}

fn indented(text: &str) -> String {
    text.lines().map(|line| format!("    {line}\n")).collect()
}

/// Runs one block; the first failure, as a message.
fn run_block(page: &Path, block: &Block, shell: &Shell) -> Result<(), String> {
    let page = page.display();
    match block.kind {
        Kind::Script => {
            let script = block.lines.join("\n");
            let (code, output) = shell.run(&script).map_err(|e| format!("{page}:{}: {e:#}", block.line))?;
            if code != Some(0) {
                return Err(format!(
                    "{page}:{}: the sh block failed ({}):\n{}output:\n{}",
                    block.line,
                    status(code),
                    indented(&script),
                    indented(&output)
                ));
            }
        }
        Kind::Console => {
            for step in blocks::steps(block).map_err(|e| format!("{page}: {e}"))? {
                let (code, output) = shell.run(&step.command).map_err(|e| format!("{page}:{}: {e:#}", step.line))?;
                if code != Some(0) {
                    return Err(format!(
                        "{page}:{}: `{}` failed ({}):\n{}",
                        step.line,
                        step.command,
                        status(code),
                        indented(&output)
                    ));
                }
                if !blocks::matches(&step.expected, &output) {
                    return Err(format!(
                        "{page}:{}: `{}` printed other output:\n{}",
                        step.line,
                        step.command,
                        blocks::diff(&step.expected, &output)
                    ));
                }
            }
        }
    }
    Ok(())
}

/// Runs the runnable blocks of a page in order; its first failure, as a message.
fn run_page(page: &str, shell: &Shell) -> Result<usize, String> {
    let path = Path::new("docs").join(page);
    let blocks = blocks::shell_blocks(&page_text(page)).map_err(|e| format!("{}: {e}", path.display()))?;
    let runnable: Vec<&Block> = blocks.iter().filter(|b| b.runs).collect();
    for block in &runnable {
        run_block(&path, block, shell)?;
    }
    Ok(runnable.len())
}

#[test]
fn the_user_pages_commands_run_against_the_demo_plane() {
    let only: Option<Vec<String>> =
        std::env::var("FERRO_IPAM_DOCS_PAGES").ok().map(|pages| pages.split(',').map(str::to_owned).collect());
    let plane = ControlPlane::start().expect("starting the control plane");
    let _provider = Provider::start(&plane, &ferro_ipam_e2e::demo::PROVIDER_ARGS).expect("starting ferro-ipam");
    ferro_ipam_e2e::demo::apply_examples(&plane).expect("applying the demo's examples");
    let shell = Shell::new(&plane);
    let mut failures = Vec::new();
    for page in &user_pages() {
        let page = page.as_str();
        if only.as_ref().is_some_and(|only| !only.iter().any(|p| p == page)) {
            continue;
        }
        let started = std::time::Instant::now();
        match run_page(page, &shell) {
            Ok(blocks) => eprintln!("docs/{page}: {blocks} blocks ran in {:.1}s", started.elapsed().as_secs_f64()),
            Err(failure) => failures.push(failure),
        }
    }
    for file in WRITTEN {
        let _ = std::fs::remove_file(repo_root().join(file));
    }
    assert!(failures.is_empty(), "{} page(s) failed:\n\n{}", failures.len(), failures.join("\n\n"));
}
